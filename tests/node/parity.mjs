// parity.mjs - reference side of tests/test_tokenizer_parity.sh: write the test documents and
// their GPT-2 ids from js-tiktoken@1.0.21 (the reference), and from the tiktoken WASM package for
// information.
//
//   node parity.mjs DIR [SAMPLE.txt ...]
//
// writes DIR/ordinary.jsonl (one JSON string per line: a document), DIR/ordinary.ref (its ids,
// one line per document, "<|endoftext|>" as plain text), DIR/special.jsonl + DIR/special.ref
// (allow_special: "<|endoftext|>" -> 50256), DIR/ordinary.wasm (tiktoken's ids, informational).
// SAMPLE files (e.g. corpus text under data/) add documents: up to 64 KB from their start, if
// they are valid UTF-8 without NULs.
import { readFileSync, writeFileSync } from 'fs';
import { getEncoding } from 'js-tiktoken';

const dir = process.argv[2];
if (!dir) { console.error('usage: node parity.mjs DIR [SAMPLE.txt ...]'); process.exit(2); }

// ---- hand-picked documents: each one aims at a rule of GPT-2's pattern
const fixed = [
  'Hello world',
  'The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of times.',
  "I'm sure you're right; we've seen it, they'll go, she'd know, it's John's and 'tis not.",
  "I'M SURE YOU'RE RIGHT; WE'VE SEEN IT, THEY'LL GO, SHE'D KNOW, IT'S JOHN'S. Don'T We'Re",
  "'s't're've'm'll'd 's 't 're 've 'm 'll 'd ''s '''t x's y'sz",
  'a   \n\n\n  b', 'trailing spaces   ', '   leading spaces', '\n\n\nnewlines\n\n', ' \n \n ', '\t\ttabs\t \tand\r\ncrlf\r\n',
  ' '.repeat(100) + 'x' + ' '.repeat(33), '\n'.repeat(40), 'x' + ' \t'.repeat(20) + '\n',
  '0 1 12 123 1234 12345 1234567890123456789012345678901234567890 3.14159 -42 +7 1e10 0x1F 1,000,000',
  'function f(x) {\n  if (x < 0) { return -x; }\n  return x * 2 + arr[i++]; // comment\n}\n',
  'def main():\n    for i in range(10):\n        print(f"{i:>4}")  # tabs:\tend\n\n',
  '#include <stdio.h>\nint main(void) { printf("%d\\n", 42); return 0; }\n',
  '<html><body class="x">&amp; &lt;tag&gt;</body></html>',
  'emoji: 🙂😀👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ ✨🎉',
  '日本語のテキストを分割します。中文文本，还有标点！한국어 텍스트입니다.',
  'Combining: e\u0301 a\u0308 n\u0303 o\u0302\u0323 \u0301alone Z\u0351\u0352\u0357a\u0300\u0301\u0302lgo',
  'Mixed: Привет мир, Γειά σου κόσμε, שלום עולם, مرحبا بالعالم, नमस्ते दुनिया, สวัสดีชาวโลก',
  'Digits: ٠١٢٣ ४५६ ²³ ½ ¾ Ⅻ ⅷ ① ⑳ 𝟙𝟚𝟛',
  'Spaces:\u00a0nbsp\u3000ideographic\u2002en\u2003em\u2009thin\u200bzwsp\u202fnnbsp\u205fmmsp\u1680ogham\u2028ls\u2029ps\ufeffbom\u180emvs\u0085nel\x1cfs\x1fus\x0bvt\x0cff',
  '\u00a0\u00a0x \u3000 y\u2003\u2003\u2003z \u00a0 ', '\ufeff\ufeffstart and end\ufeff',
  'Punctuation!!! ??? ... --- *** ___ ~~~ ((())) [[x]] {{y}} <<z>> «»„“”‘’ — – …',
  "Quotes: 'single' \"double\" `back` ‘curly’ “curly” it’s don’t",
  'URLs: https://example.com/path?q=1&r=2#frag mail@example.org C:\\Windows\\System32',
  'a', ' ', '  ', '\n', "'", "'s", ' 1', ' !', ' é', ' 日', 'é', '🙂', '\u0301',
  'x'.repeat(3000), 'ab'.repeat(1500), '='.repeat(200) + '-'.repeat(200), '1234567890'.repeat(100),
  'supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis',
  'Ünïcödé Wörds wïth Äccents: Straße, Ærøskøbing, Œuvre, İstanbul, ΣΊΣΥΦΟΣ',
  'control chars \x01\x02\x03\x7f mixed \x1b[31mred\x1b[0m',
  'a<|endoftext|>b <|endoftext|>  <|endoftext|>\n<|endo<|endoftext|>ftext|>',
];

// ---- random documents from a weighted pool of atoms (fixed seed: the same every run)
let seed = 20240520;
function rand() {  // mulberry32
  seed = (seed + 0x6D2B79F5) | 0;
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const atoms = [
  ['the', 8], ['quick', 3], ['Brown', 2], ['fox', 2], ['HELLO', 1], ['a', 3], ['x', 2], ['é', 1], ['ß', 1],
  [' ', 14], ['  ', 3], ['\n', 5], ['\n\n', 2], ['\t', 2], ['\r\n', 1], ['\u000b', 1], ['\f', 1],
  ['0', 2], ['42', 2], ['2024', 1], ['3.14', 1], ['²', 1], ['½', 1], ['٣', 1], ['Ⅻ', 1],
  ["'", 3], ["'s", 2], ["'t", 2], ["'re", 1], ["'ve", 1], ["'m", 1], ["'ll", 1], ["'d", 1], ["'S", 1], ["'LL", 1], ['’', 1],
  ['.', 4], [',', 4], ['!', 1], ['?', 1], ['-', 2], ['--', 1], ['(', 1], [')', 1], ['"', 2], [';', 1], ['{', 1], ['}', 1],
  ['@', 1], ['#', 1], ['_', 1], ['\\', 1], ['/', 1], ['*', 1], ['|', 1], ['<|', 1], ['|>', 1], ['<|endoftext|>', 1],
  ['日本', 2], ['語', 1], ['。', 1], ['한국', 1], ['Привет', 1], ['مرحبا', 1], ['नमस्ते', 1], ['สวัสดี', 1],
  ['🙂', 2], ['👍🏽', 1], ['👨‍👩‍👧', 1], ['🇫🇷', 1], ['❤️', 1], ['\u0301', 2], ['\u0308', 1], ['\u200d', 1],
  ['\u00a0', 2], ['\u3000', 1], ['\u2003', 1], ['\u2028', 1], ['\u202f', 1], ['\ufeff', 1], ['\u0085', 1],
  ['\u200b', 1], ['\u180e', 1], ['\x1c', 1], ['\x01', 1], ['\x7f', 1],
];
const total = atoms.reduce((s, a) => s + a[1], 0);
function atom() {
  let r = rand() * total;
  for (const [s, w] of atoms) { if ((r -= w) < 0) return s; }
  return atoms[0][0];
}
const fuzz = [];
for (let i = 0; i < 600; i++) {
  const n = 1 + Math.floor(rand() * (i < 500 ? 24 : 300));
  let s = '';
  for (let k = 0; k < n; k++) s += atom();
  fuzz.push(s);
}

// ---- corpus samples
const samples = [];
for (const f of process.argv.slice(3)) {
  const buf = readFileSync(f).subarray(0, 65536);
  // Drop a character cut at the 64 KB mark; skip files that are not valid UTF-8 or hold NULs.
  let s = null;
  for (let cut = 0; cut < 4 && s === null; cut++) {
    try { s = new TextDecoder('utf-8', { fatal: true }).decode(buf.subarray(0, buf.length - cut)); } catch { s = null; }
  }
  if (s === null || s.length === 0 || s.includes('\u0000')) continue;
  samples.push(s);
}

const docs = [...fixed, ...fuzz, ...samples];
const enc = getEncoding('gpt2');
const write = (name, lines) => writeFileSync(`${dir}/${name}`, lines.join('\n') + '\n');
write('ordinary.jsonl', docs.map((d) => JSON.stringify(d)));
write('ordinary.ref', docs.map((d) => enc.encode(d, [], []).join(' ')));
const special = docs.filter((d) => d.includes('<|endoftext|>'));
write('special.jsonl', special.map((d) => JSON.stringify(d)));
write('special.ref', special.map((d) => enc.encode(d, 'all').join(' ')));

// tiktoken's Rust regex reads \s as Unicode White_Space (U+0085 yes, U+FEFF no), unlike
// JavaScript, so it may differ on those characters: informational only.
try {
  const { get_encoding } = await import('tiktoken');
  const w = get_encoding('gpt2');
  write('ordinary.wasm', docs.map((d) => Array.from(w.encode_ordinary(d)).join(' ')));
  w.free();
} catch (e) {
  console.error(`tiktoken (wasm) not available: ${e.message}`);
}
console.error(`parity.mjs: ${docs.length} documents (${fixed.length} fixed, ${fuzz.length} random, ${samples.length} corpus samples), ${special.length} with <|endoftext|>`);
