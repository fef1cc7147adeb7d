#!/usr/bin/env python3
"""tiktoken_parity.py - reference side of tests/test_tokenizer_parity.sh: write the test documents
and their GPT-2 ids from PyPI tiktoken (pinned in scripts/requirements.txt, run from .venv),
built offline from data/gpt2's encoder.json and vocab.bpe (nothing is downloaded).

    .venv/bin/python tests/tiktoken_parity.py GPT2_DIR OUT_DIR [--sotu RAW_SOTU] [SAMPLE.txt ...]

Two encodings share the same ranks and specials:
  gpt2   GPT-2's pattern exactly as OpenAI wrote it; tiktoken's (Rust) regex reads its \\s as
         Unicode White_Space, which includes U+0085 and not U+FEFF.
  gpt2js the same pattern with \\s spelled out as JavaScript's \\s (no U+0085, but U+FEFF), as
         js-tiktoken read it (and lssar until 2026-12-05; now informational).
The two can only differ on documents holding U+0085 or U+FEFF.

Writes to OUT_DIR: ordinary.jsonl (a JSON string per line: a document), ordinary.ref (gpt2js ids,
one line per document, "<|endoftext|>" as plain text), ordinary.std (gpt2 ids), ordinary.ws (1 if
the document holds U+0085 or U+FEFF, else 0); special.jsonl, special.ref, special.std, special.ws
for the documents holding "<|endoftext|>", encoded with allowed_special="all" (-> 50256).
SAMPLE files (e.g. corpus text under data/) add documents: up to 64 KB from their start, if
they are valid UTF-8 without NULs. --sotu RAW_SOTU (raw/sotu of scripts/fetch-corpora.sh) adds the
whole-corpus check: sotu.jsonl holds the 237 addresses as they are in the package (metadata.csv
rows with is_sotu True), sotu.ref (gpt2js) and sotu.std (gpt2) their ids. The documents are those
of the former tests/node/parity.mjs: the same fixed list and the same 600 random mixes (the same
mulberry32 generator and seed).
"""
import hashlib
import json
import os
import sys

os.environ["TIKTOKEN_CACHE_DIR"] = ""  # read the local files directly; cache nothing
import tiktoken  # noqa: E402
import tiktoken.load  # noqa: E402

SHA_ENCODER = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
SHA_VOCAB = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
PAT = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
JS_WS = r"\t\n\x{0B}\f\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}"
PAT_JS = (r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^" + JS_WS + r"\p{L}\p{N}]+|[" + JS_WS
          + r"]+(?![^" + JS_WS + r"])|[" + JS_WS + r"]+")
SPECIAL = {"<|endoftext|>": 50256}


def encodings(gpt2_dir):
    """(gpt2, gpt2js) built from the local files, checked against their known sha256."""
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        os.path.join(gpt2_dir, "vocab.bpe"), os.path.join(gpt2_dir, "encoder.json"),
        vocab_bpe_hash=SHA_VOCAB, encoder_json_hash=SHA_ENCODER)
    std = tiktoken.Encoding(name="gpt2", pat_str=PAT, mergeable_ranks=ranks,
                            special_tokens=SPECIAL, explicit_n_vocab=50257)
    js = tiktoken.Encoding(name="gpt2js", pat_str=PAT_JS, mergeable_ranks=ranks,
                           special_tokens=SPECIAL, explicit_n_vocab=50257)
    assert std.encode_ordinary("Hello world") == [15496, 995], "tiktoken: 'Hello world' is not [15496, 995]"
    return std, js


# ---- hand-picked documents: each one aims at a rule of GPT-2's pattern
FIXED = [
    'Hello world',
    'The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of times.',
    "I'm sure you're right; we've seen it, they'll go, she'd know, it's John's and 'tis not.",
    "I'M SURE YOU'RE RIGHT; WE'VE SEEN IT, THEY'LL GO, SHE'D KNOW, IT'S JOHN'S. Don'T We'Re",
    "'s't're've'm'll'd 's 't 're 've 'm 'll 'd ''s '''t x's y'sz",
    'a   \n\n\n  b', 'trailing spaces   ', '   leading spaces', '\n\n\nnewlines\n\n', ' \n \n ', '\t\ttabs\t \tand\r\ncrlf\r\n',
    ' ' * 100 + 'x' + ' ' * 33, '\n' * 40, 'x' + ' \t' * 20 + '\n',
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
    'x \ufeffy', 'a \u0085b', 'a  \u0085\u0085 b\ufeff \ufeff',
    'Punctuation!!! ??? ... --- *** ___ ~~~ ((())) [[x]] {{y}} <<z>> «»„“”‘’ — – …',
    "Quotes: 'single' \"double\" `back` ‘curly’ “curly” it’s don’t",
    'URLs: https://example.com/path?q=1&r=2#frag mail@example.org C:\\Windows\\System32',
    'a', ' ', '  ', '\n', "'", "'s", ' 1', ' !', ' é', ' 日', 'é', '🙂', '\u0301',
    'x' * 3000, 'ab' * 1500, '=' * 200 + '-' * 200, '1234567890' * 100,
    'supercalifragilisticexpialidocious antidisestablishmentarianism pneumonoultramicroscopicsilicovolcanoconiosis',
    'Ünïcödé Wörds wïth Äccents: Straße, Ærøskøbing, Œuvre, İstanbul, ΣΊΣΥΦΟΣ',
    'control chars \x01\x02\x03\x7f mixed \x1b[31mred\x1b[0m',
    'a<|endoftext|>b <|endoftext|>  <|endoftext|>\n<|endo<|endoftext|>ftext|>',
]

# ---- random documents from a weighted pool of atoms (fixed seed: the same every run)
ATOMS = [
    ('the', 8), ('quick', 3), ('Brown', 2), ('fox', 2), ('HELLO', 1), ('a', 3), ('x', 2), ('é', 1), ('ß', 1),
    (' ', 14), ('  ', 3), ('\n', 5), ('\n\n', 2), ('\t', 2), ('\r\n', 1), ('\u000b', 1), ('\f', 1),
    ('0', 2), ('42', 2), ('2024', 1), ('3.14', 1), ('²', 1), ('½', 1), ('٣', 1), ('Ⅻ', 1),
    ("'", 3), ("'s", 2), ("'t", 2), ("'re", 1), ("'ve", 1), ("'m", 1), ("'ll", 1), ("'d", 1), ("'S", 1), ("'LL", 1), ('’', 1),
    ('.', 4), (',', 4), ('!', 1), ('?', 1), ('-', 2), ('--', 1), ('(', 1), (')', 1), ('"', 2), (';', 1), ('{', 1), ('}', 1),
    ('@', 1), ('#', 1), ('_', 1), ('\\', 1), ('/', 1), ('*', 1), ('|', 1), ('<|', 1), ('|>', 1), ('<|endoftext|>', 1),
    ('日本', 2), ('語', 1), ('。', 1), ('한국', 1), ('Привет', 1), ('مرحبا', 1), ('नमस्ते', 1), ('สวัสดี', 1),
    ('🙂', 2), ('👍🏽', 1), ('👨‍👩‍👧', 1), ('🇫🇷', 1), ('❤️', 1), ('\u0301', 2), ('\u0308', 1), ('\u200d', 1),
    ('\u00a0', 2), ('\u3000', 1), ('\u2003', 1), ('\u2028', 1), ('\u202f', 1), ('\ufeff', 1), ('\u0085', 1),
    ('\u200b', 1), ('\u180e', 1), ('\x1c', 1), ('\x01', 1), ('\x7f', 1),
]

M32 = 0xFFFFFFFF


class Mulberry32:
    """JavaScript's mulberry32 as parity.mjs ran it (32-bit arithmetic), so the documents match."""

    def __init__(self, seed):
        self.seed = seed & M32

    def __call__(self):
        self.seed = (self.seed + 0x6D2B79F5) & M32
        s = self.seed
        t = ((s ^ (s >> 15)) * (1 | s)) & M32
        t = ((t + (((t ^ (t >> 7)) * (61 | t)) & M32)) & M32) ^ t
        return ((t ^ (t >> 14)) & M32) / 4294967296


def fuzz_docs():
    rand = Mulberry32(20240520)
    total = sum(w for _, w in ATOMS)

    def atom():
        r = rand() * total
        for s, w in ATOMS:
            r -= w
            if r < 0:
                return s
        return ATOMS[0][0]

    docs = []
    for i in range(600):
        n = 1 + int(rand() * (24 if i < 500 else 300))
        docs.append(''.join(atom() for _ in range(n)))
    return docs


def sample_docs(paths):
    docs = []
    for f in paths:
        with open(f, 'rb') as fh:
            buf = fh.read(65536)
        s = None
        for cut in range(4):  # drop a character cut at the 64 KB mark
            try:
                s = buf[:len(buf) - cut].decode('utf-8')
                break
            except UnicodeDecodeError:
                s = None
        if not s or '\0' in s:
            continue
        docs.append(s)
    return docs


def main(argv):
    if len(argv) < 3:
        print('usage: tiktoken_parity.py GPT2_DIR OUT_DIR [--sotu RAW_SOTU] [SAMPLE.txt ...]', file=sys.stderr)
        return 2
    gpt2_dir, out, rest = argv[1], argv[2], argv[3:]
    sotu = None
    if rest[:1] == ['--sotu']:
        sotu, rest = rest[1], rest[2:]
    std, js = encodings(gpt2_dir)
    fixed, fuzz, samples = FIXED, fuzz_docs(), sample_docs(rest)
    docs = fixed + fuzz + samples
    special = [d for d in docs if '<|endoftext|>' in d]

    def write(name, lines):
        with open(os.path.join(out, name), 'w', encoding='utf-8', newline='\n') as fh:
            fh.write('\n'.join(lines) + '\n')

    def ws(d):
        return '1' if ('\u0085' in d or '\ufeff' in d) else '0'

    sets = [('ordinary', docs, lambda e, d: e.encode_ordinary(d)),
            ('special', special, lambda e, d: e.encode(d, allowed_special='all'))]
    if sotu:
        import csv
        data = os.path.join(sotu, 'sotu', 'data')
        with open(os.path.join(data, 'metadata.csv'), newline='', encoding='utf-8') as fh:
            ids = [r['fileid'] for r in csv.DictReader(fh) if r['is_sotu'] == 'True']
        speeches = []
        for i in ids:
            with open(os.path.join(data, 'speeches', i + '.txt'), encoding='utf-8', newline='') as fh:
                speeches.append(fh.read())
        sets.append(('sotu', speeches, lambda e, d: e.encode_ordinary(d)))
    for name, ds, enc in sets:
        write(name + '.jsonl', [json.dumps(d, ensure_ascii=False) for d in ds])
        write(name + '.ref', [' '.join(map(str, enc(js, d))) for d in ds])
        write(name + '.std', [' '.join(map(str, enc(std, d))) for d in ds])
        write(name + '.ws', [ws(d) for d in ds])
    digest = hashlib.sha256('\0'.join(fuzz).encode()).hexdigest()[:12]
    print(f'tiktoken_parity.py: tiktoken {tiktoken.__version__}: {len(docs)} documents ({len(fixed)} fixed, '
          f'{len(fuzz)} random [sha256 {digest}], {len(samples)} corpus samples), {len(special)} with <|endoftext|>',
          file=sys.stderr)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
