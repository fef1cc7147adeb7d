#!/usr/bin/env python3
"""tiktoken_bench.py - the reference side of bench/tokenizer.sh: GPT-2 encoding throughput of PyPI
tiktoken (Rust, run from .venv), built offline from data/gpt2 with GPT-2's pattern as written.

    python tiktoken_bench.py prepare RAW OUT MAXBYTES
        make OUT: RAW as valid UTF-8 (invalid bytes replaced, NULs dropped), cut to MAXBYTES
        without cutting a character, so every encoder sees the same characters
    .venv/bin/python tiktoken_bench.py run GPT2_DIR FILE REPS THREADS DOC_BYTES
        print "RESULT tiktoken 1 MB/s tokens load_ms" (the whole text as one document, one thread,
        best of REPS) and, for each thread count in THREADS (e.g. 1,2), "RESULT tiktoken-docs N
        MB/s documents speedup" from encode_ordinary_batch on the text cut into documents of about
        DOC_BYTES exactly as bench/tokenizer_bench.c cuts it (at a space or line end).
MB = 10^6 bytes of input text.
"""
import os
import sys
import time


def prepare(raw, out, maxbytes):
    with open(raw, 'rb') as f:
        s = f.read().decode('utf-8', errors='replace').replace('\0', '')
    b = s.encode('utf-8')
    if len(b) > maxbytes:
        end = maxbytes
        while end > 0 and (b[end] & 0xC0) == 0x80:  # do not cut a character
            end -= 1
        b = b[:end]
    with open(out, 'wb') as f:
        f.write(b)


def cut_docs(b, doc_bytes):
    docs, p, n = [], 0, len(b)
    while p < n:
        q = min(p + doc_bytes, n)
        while q < n and b[q - 1] not in (0x0A, 0x20):
            q += 1
        docs.append(b[p:q].decode('utf-8'))
        p = q
    return docs


def run(gpt2_dir, path, reps, threads, doc_bytes):
    os.environ['TIKTOKEN_CACHE_DIR'] = ''  # read the local files; cache nothing
    t0 = time.perf_counter()
    import tiktoken
    import tiktoken.load
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        os.path.join(gpt2_dir, 'vocab.bpe'), os.path.join(gpt2_dir, 'encoder.json'),
        vocab_bpe_hash='1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5',
        encoder_json_hash='196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783')
    enc = tiktoken.Encoding(
        name='gpt2', mergeable_ranks=ranks, special_tokens={'<|endoftext|>': 50256}, explicit_n_vocab=50257,
        pat_str=r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
    enc.encode_ordinary('warm up: Hello world')
    load_ms = (time.perf_counter() - t0) * 1e3
    with open(path, 'rb') as f:
        b = f.read()
    text = b.decode('utf-8')
    nbytes = len(b)
    enc.encode_ordinary(text[:10000])
    best, ntok = float('inf'), 0
    for _ in range(reps):
        t1 = time.perf_counter()
        ntok = len(enc.encode_ordinary(text))
        best = min(best, time.perf_counter() - t1)
    print(f'RESULT tiktoken-{tiktoken.__version__} 1 {nbytes / best / 1e6:.2f} {ntok} {load_ms:.1f}')
    docs = cut_docs(b, doc_bytes)
    base = None
    for nt in threads:
        bt = float('inf')
        for _ in range(reps):
            t1 = time.perf_counter()
            out = enc.encode_ordinary_batch(docs, num_threads=nt)
            bt = min(bt, time.perf_counter() - t1)
        del out
        base = base or bt
        print(f'RESULT tiktoken-docs {nt} {nbytes / bt / 1e6:.2f} {len(docs)} {base / bt:.2f}')


def main(argv):
    if len(argv) == 5 and argv[1] == 'prepare':
        prepare(argv[2], argv[3], int(argv[4]))
        return 0
    if len(argv) == 7 and argv[1] == 'run':
        run(argv[2], argv[3], int(argv[4]), [int(x) for x in argv[5].split(',') if x], int(argv[6]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
