// bench.mjs - the reference side of bench/tokenizer.sh: single-thread GPT-2 encoding throughput
// of js-tiktoken (pure JavaScript) and tiktoken (Rust compiled to WASM) on the same text file.
//
//   node bench.mjs prepare RAW OUT MAXBYTES   make OUT: RAW as valid UTF-8, cut to MAXBYTES
//   node bench.mjs run FILE REPS              print "RESULT name threads MB/s tokens load_ms"
import { readFileSync, writeFileSync } from 'fs';

const [mode, a, b, c] = process.argv.slice(2);
if (mode === 'prepare') {
  // Decoding replaces invalid UTF-8, so every encoder sees exactly the same characters.
  let s = readFileSync(a).toString('utf8').replace(/\u0000/g, '');
  let buf = Buffer.from(s, 'utf8');
  if (buf.length > Number(c)) {
    let end = Number(c);
    while (end > 0 && (buf[end] & 0xc0) === 0x80) end--;  // do not cut a character
    buf = buf.subarray(0, end);
  }
  writeFileSync(b, buf);
  process.exit(0);
}
if (mode !== 'run') { console.error('usage: node bench.mjs prepare RAW OUT MAXBYTES | run FILE REPS'); process.exit(2); }

const text = readFileSync(a, 'utf8');
const bytes = Buffer.byteLength(text, 'utf8');
const reps = Number(b) || 2;

function best(fn) {
  fn(text.slice(0, 10000));  // warm up the JIT
  let t = Infinity, n = 0;
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    n = fn(text);
    t = Math.min(t, performance.now() - t0);
  }
  return [bytes / t / 1000, n];
}

{
  const t0 = performance.now();
  const { getEncoding } = await import('js-tiktoken');
  const enc = getEncoding('gpt2');
  const load = performance.now() - t0;
  const [mbs, n] = best((s) => enc.encode(s, [], []).length);
  console.log(`RESULT js-tiktoken@1.0.21 1 ${mbs.toFixed(2)} ${n} ${load.toFixed(1)}`);
}
{
  const t0 = performance.now();
  const { get_encoding } = await import('tiktoken');
  const enc = get_encoding('gpt2');
  const load = performance.now() - t0;
  const [mbs, n] = best((s) => enc.encode_ordinary(s).length);
  console.log(`RESULT tiktoken@1.0.22(wasm) 1 ${mbs.toFixed(2)} ${n} ${load.toFixed(1)}`);
  enc.free();
}
