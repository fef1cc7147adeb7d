#!/usr/bin/env bash
# test_badinput.sh - bad input files at the CLI. Every lssar command that reads a file is run on
# mutated copies of small valid inputs made here (a synthetic shard, tiny trained models, a text
# file, a byte-level data folder, orbit data, CSVs, JSON/JSONL files): empty, missing, a directory
# instead of the file, random bytes, truncated at random lengths, random bytes flipped, header
# fields (shard ints, safetensors length and JSON numbers, orbit headers) overwritten with
# huge/negative/zero values, text with NULs, very long lines, NaN and bad numbers, wrong-format
# files (JSON where a shard is expected, a shard where text is expected). Seeded: the same
# BADINPUT_SEED gives the same mutations.
#
# A run passes when the exit status is 0, 1 or 2 (a harmless mutation may succeed), not a signal
# (nor >= 128), no sanitizer report, no timeout, no "out of memory" (a size from a header must be
# checked against the file before it is allocated), peak RSS under BADINPUT_RSS_MB, and on exit
# 1 or 2 the output names the mutated file (its basename) or the flag that gave it.
# Runs are under an address-space limit (BADINPUT_VMEM_MB, default 4096; not with ASan/valgrind).
#
# Environment:
#   LSSAR_BIN          binary (default build/lssar)
#   BADINPUT_N         mutations per target, at least the 12 generic ones (default 25; ~40 targets; scripts/badinput.sh runs 1000)
#   BADINPUT_SEED      seed of the mutations (default 1)
#   BADINPUT_JOBS      runs in parallel (default 2)
#   BADINPUT_ONLY      regex: only targets whose name matches
#   BADINPUT_VALGRIND  1: every run under valgrind memcheck (definite leaks and errors fail;
#                      tests/valgrind.supp); use a small BADINPUT_N
#   BADINPUT_KEEP      folder: copy each failing mutant there (to reproduce it)
#   BADINPUT_TIMEOUT   seconds per run (default 30; 600 under valgrind)
# Ends with "test_badinput: N passed, M failed" (one test per target: all its mutations pass).
cd "$(dirname "$0")/.."
LSSAR=${LSSAR_BIN:-build/lssar}
if [ ! -x "$LSSAR" ]; then echo "test_badinput: $LSSAR is not built"; echo "test_badinput: 0 passed, 1 failed"; exit 1; fi
tmp=$(mktemp -d /tmp/lssar_badinput_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
F=$tmp/fix
mkdir -p "$F"
T1="--threads 1"
PY=/usr/bin/python3; [ -x $PY ] || PY=python3
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
start=$SECONDS

# ---- small valid inputs
$PY - "$F" <<'PY'
import os, random, sys
F = sys.argv[1]; r = random.Random(5)
who = ["The king", "The old man", "She", "He", "The boy", "They"]
verb = ["went to the", "looked at the", "walked along the", "opened the door of the"]
what = ["sea", "city", "river", "house", "church", "ship"]
with open(F + "/text.txt", "w") as f:
    for _ in range(120): f.write("%s %s %s.\n" % (r.choice(who), r.choice(verb), r.choice(what)))
os.makedirs(F + "/docs", exist_ok=True)
for d in range(10):
    with open(F + "/docs/doc%02d.txt" % d, "w") as f:
        for _ in range(30 + 10 * d): f.write("%s %s %s. " % (r.choice(who), r.choice(verb), r.choice(what)))
with open(F + "/ids.txt", "w") as f: f.write(" ".join(str(r.randrange(50257)) for _ in range(60)) + "\n")
with open(F + "/docs.jsonl", "w") as f:
    for _ in range(6): f.write('"%s %s %s."\n' % (r.choice(who), r.choice(verb), r.choice(what)))
with open(F + "/law.csv", "w") as f:
    f.write("x,y,F\n")
    for _ in range(40):
        x, y = r.uniform(1, 3), r.uniform(1, 3); f.write("%g,%g,%g\n" % (x, y, x * y / 2))
with open(F + "/forces.csv", "w") as f:
    f.write("r,m1,m2,F_pred,F_true\n")
    for _ in range(60):
        R, m1, m2 = r.uniform(0.5, 5), r.uniform(1e-6, 1e-3), r.uniform(0.5, 2)
        Fv = 39.478 * m1 * m2 / R ** 2; f.write("%g,%g,%g,%g,%g\n" % (R, m1, m2, Fv * r.uniform(.95, 1.05), Fv))
PY
fixlog=$tmp/fixtures.log
{
  set -e
  $LSSAR data synth --tokens 4000 --alphabet 15 --seed 1 --out $F/train.bin
  $LSSAR data synth --tokens 1500 --alphabet 15 --seed 2 --out $F/val.bin
  $LSSAR train --data $F/train.bin --val $F/val.bin --vocab 16 --layers 1 --heads 2 --dim 16 --seq 32 --batch 2 --steps 3 --out $F/m16 --quiet $T1
  $LSSAR tokenize --tokenizer byte --in $F/text.txt --out $F/bytes.bin
  $LSSAR train --data $F/bytes.bin --vocab 257 --layers 1 --heads 2 --dim 16 --seq 64 --batch 2 --steps 3 --out $F/m257 --quiet $T1
  have_gpt2=0
  if [ -f "${LSSAR_DATA:-data}/gpt2/encoder.json" ] && [ -f "${LSSAR_DATA:-data}/gpt2/vocab.bpe" ]; then
    mkdir -p $F/gpt2 && cp "${LSSAR_DATA:-data}/gpt2/encoder.json" "${LSSAR_DATA:-data}/gpt2/vocab.bpe" $F/gpt2/
    $LSSAR tokenize --in $F/text.txt --out $F/gpt2.bin
    $LSSAR train --data $F/gpt2.bin --vocab 50257 --layers 1 --heads 2 --dim 16 --seq 32 --batch 2 --steps 2 --attn softmax --out $F/mgpt2 --quiet $T1
  fi
  cp tests/fixtures/downstream/mini.jsonl $F/task.jsonl
  $LSSAR data build --text $F/docs --tokenizer byte --out $F/dx --val-frac 0.3 --shard-tokens 4000 --quiet
  $LSSAR extrapolate --data $F/dx --attn softmax --seq 16 --factors 1,2 --layers 1 --heads 1 --dim 8 --batch 1 --steps 1 \
    --max-windows 2 --no-plot --no-zeroshot --quiet --out $F/ex $T1
  $LSSAR orbits simulate --out $F/orb --split val --systems 2 --seed 2 --quiet $T1
  $LSSAR orbits simulate --out $F/orb --split force --two-body --state --systems 20 --seed 3 --quiet $T1
  $LSSAR train --data $F/orb/val_000000.bin --vocab 7003 --layers 1 --heads 2 --dim 16 --seq 64 --batch 2 --steps 2 --out $F/morb --quiet $T1
} >"$fixlog" 2>&1
if [ $? -ne 0 ]; then
  tail -20 "$fixlog"; echo "test_badinput: making the valid inputs failed"; echo "test_badinput: 0 passed, 1 failed"; exit 1
fi
echo "# fixtures made in $((SECONDS - start)) s"

SAN=0; grep -q -- '-fsanitize=' "$(dirname "$LSSAR")/build-flags" 2>/dev/null && SAN=1
export SAN LSSAR F
$PY - <<'PY'
import concurrent.futures as cf, os, random, re, resource, shutil, signal, struct, subprocess, sys, tempfile, threading, time

LSSAR, F = os.path.abspath(os.environ["LSSAR"]), os.environ["F"]
N = int(os.environ.get("BADINPUT_N", "25"))
SEED = os.environ.get("BADINPUT_SEED", "1")
JOBS = int(os.environ.get("BADINPUT_JOBS", "2"))
ONLY = os.environ.get("BADINPUT_ONLY", "")
VG = os.environ.get("BADINPUT_VALGRIND", "") not in ("", "0")
KEEP = os.environ.get("BADINPUT_KEEP", "")
SAN = os.environ.get("SAN") == "1"
TIMEOUT = float(os.environ.get("BADINPUT_TIMEOUT", "600" if VG else "30"))
VMEM = int(os.environ.get("BADINPUT_VMEM_MB", "4096"))
RSS_MB = int(os.environ.get("BADINPUT_RSS_MB", "1024"))
SUPP = os.path.abspath("tests/valgrind.supp")
WORK = tempfile.mkdtemp(dir=os.path.dirname(F), prefix="work_")
T1 = ["--threads", "1"]
HAVE_GPT2 = os.path.exists(F + "/mgpt2/model.safetensors")

# ---- targets: (name, kind, file to mutate relative to F, folder copied per run or None, flag, argv)
# {P} is the mutated file, {W} the run's folder (holding the copied folder), {O} a fresh output folder.
TRAIN = ["--vocab", "16", "--layers", "1", "--heads", "1", "--dim", "8", "--seq", "16", "--batch", "1", "--steps", "1", "--quiet"] + T1
EX = ["--attn", "softmax", "--seq", "16", "--factors", "1,2", "--layers", "1", "--heads", "1", "--dim", "8", "--batch", "1",
      "--steps", "1", "--max-windows", "2", "--no-plot", "--no-zeroshot", "--quiet"] + T1
SR = ["--galaxies", "1", "--rows", "20", "--iterations", "1", "--restarts", "1", "--populations", "1", "--cycles", "2", "--quiet"] + T1
T = []
def tgt(name, kind, rel, folder, flag, argv, n=None): T.append(dict(name=name, kind=kind, rel=rel, folder=folder, flag=flag, argv=argv, n=n))
tgt("train --data", "shard", "train.bin", None, "--data", ["train", "--data", "{P}", "--out", "{O}/t"] + TRAIN)
tgt("train --val", "shard", "val.bin", None, "--val", ["train", "--data", F + "/train.bin", "--val", "{P}", "--eval-every", "1", "--out", "{O}/t"] + TRAIN)
tgt("train --resume (model)", "safetensors", "m16/model.safetensors", "m16", "--out", ["train", "--out", "{W}/m16", "--resume", "--steps", "4", "--quiet"] + T1)
tgt("train --resume (trainer)", "safetensors", "m16/trainer.safetensors", "m16", "--out", ["train", "--out", "{W}/m16", "--resume", "--steps", "4", "--quiet"] + T1)
tgt("eval --model", "safetensors", "m16/model.safetensors", "m16", "--model", ["eval", "--model", "{W}/m16", "--data", F + "/val.bin", "--seq", "32", "--batches", "1"] + T1)
tgt("eval --model FILE", "safetensors", "m16/model.safetensors", None, "--model", ["eval", "--model", "{P}", "--data", F + "/val.bin", "--seq", "32", "--batches", "1"] + T1)
tgt("eval --data", "shard", "val.bin", None, "--data", ["eval", "--model", F + "/m16", "--data", "{P}", "--seq", "16,32", "--batches", "2"] + T1)
tgt("sample --model", "safetensors", "m16/model.safetensors", "m16", "--model", ["sample", "--model", "{W}/m16", "--prompt-ids", "1,2", "--tokens", "3"] + T1)
tgt("passkey --model", "safetensors", "m257/model.safetensors", "m257", "--model", ["passkey", "--model", "{W}/m257", "--lengths", "256", "--depths", "1", "--trials", "1", "--batch", "1"] + T1)
tgt("passkey --model A,B (B)", "safetensors", "m257/model.safetensors", "m257", "--model", ["passkey", "--model", F + "/m257,{W}/m257", "--lengths", "256", "--depths", "1", "--trials", "1", "--batch", "1"] + T1)
tgt("passkey (trainer.safetensors)", "safetensors", "m257/trainer.safetensors", "m257", "--model", ["passkey", "--model", "{W}/m257", "--lengths", "256", "--depths", "1", "--trials", "1", "--batch", "1"] + T1)
tgt("attnstats --model", "safetensors", "m16/model.safetensors", "m16", "--model", ["attnstats", "--model", "{W}/m16", "--data", F + "/val.bin", "--seq", "16", "--windows", "1", "--rows", "2"] + T1)
tgt("attnstats --data", "shard", "val.bin", None, "--data", ["attnstats", "--model", F + "/m16", "--data", "{P}", "--seq", "16,64", "--windows", "2", "--rows", "2"] + T1)
tgt("attnstats (val_index.json)", "json", "dx/val_index.json", "dx", "--data", ["attnstats", "--model", F + "/m257", "--data", "{W}/dx/val.bin", "--seq", "16", "--windows", "2", "--rows", "2"] + T1)
if HAVE_GPT2:
    tgt("downstream --tasks", "jsonl", "task.jsonl", None, "--tasks", ["downstream", "--model", F + "/mgpt2", "--tasks", "mini={P}", "--limit", "3", "--batch", "4", "--quiet"] + T1)
    tgt("downstream --model", "safetensors", "mgpt2/model.safetensors", "mgpt2", "--model", ["downstream", "--model", "{W}/mgpt2", "--tasks", "mini=" + F + "/task.jsonl", "--limit", "2", "--quiet"] + T1, n=max(4, N // 4))
    tgt("tokenize --in (gpt2)", "text", "text.txt", None, "--in", ["tokenize", "--in", "{P}"])
    tgt("tokenize --decode --in ids", "text", "ids.txt", None, "--in", ["tokenize", "--decode", "--in", "{P}"])
    tgt("tokenize --decode --in shard", "shard", "gpt2.bin", None, "--in", ["tokenize", "--decode", "--in", "{P}"])
    tgt("tokenize --jsonl", "jsonl", "docs.jsonl", None, "--in", ["tokenize", "--jsonl", "--in", "{P}"])
    tgt("tokenize (gpt2/encoder.json)", "json", "gpt2/encoder.json", "gpt2", "encoder.json", ["tokenize", "--in", F + "/text.txt", "@LSSAR_DATA={W}"], n=max(4, N // 4))
    tgt("tokenize (gpt2/vocab.bpe)", "text", "gpt2/vocab.bpe", "gpt2", "vocab.bpe", ["tokenize", "--in", F + "/text.txt", "@LSSAR_DATA={W}"], n=max(4, N // 4))
tgt("tokenize --tokenizer byte --out", "text", "text.txt", None, "--in", ["tokenize", "--tokenizer", "byte", "--in", "{P}", "--out", "{O}/x.bin"])
tgt("data build --text FILE", "text", "text.txt", None, "--text", ["data", "build", "--text", "{P}", "--tokenizer", "byte", "--out", "{O}/db", "--quiet"])
tgt("data build --text DIR", "text", "docs/doc03.txt", "docs", "--text", ["data", "build", "--text", "{W}/docs", "--tokenizer", "byte", "--out", "{O}/db", "--quiet"])
tgt("extrapolate (val.bin)", "shard", "dx/val.bin", "dx", "--data", ["extrapolate", "--data", "{W}/dx", "--out", "{O}/ex"] + EX)
tgt("extrapolate (train_000.bin)", "shard", "dx/train_000.bin", "dx", "--data", ["extrapolate", "--data", "{W}/dx", "--out", "{O}/ex"] + EX)
tgt("extrapolate (val_index.json)", "json", "dx/val_index.json", "dx", "--data", ["extrapolate", "--data", "{W}/dx", "--out", "{O}/ex"] + EX)
tgt("extrapolate (manifest.json)", "json", "dx/manifest.json", "dx", "--data", ["extrapolate", "--data", "{W}/dx", "--out", "{O}/ex"] + EX)
tgt("extrapolate (cached model)", "safetensors", "ex/softmax/model.safetensors", "ex", "--out", ["extrapolate", "--data", F + "/dx", "--out", "{W}/ex"] + EX)
tgt("extrapolate (cached trainer)", "safetensors", "ex/softmax/trainer.safetensors", "ex", "--out", ["extrapolate", "--data", F + "/dx", "--out", "{W}/ex"] + EX)
tgt("extrapolate (cached extrap.json)", "json", "ex/softmax/extrap.json", "ex", "--out", ["extrapolate", "--data", F + "/dx", "--out", "{W}/ex"] + EX)
tgt("symreg --csv", "csv", "law.csv", None, "--csv", ["symreg", "--csv", "{P}", "--target", "F", "--iterations", "1", "--populations", "1", "--population-size", "10", "--cycles", "2", "--quiet"] + T1)
tgt("orbits eval --model", "safetensors", "morb/model.safetensors", "morb", "--model", ["orbits", "eval", "--model", "{W}/morb", "--data", F + "/orb", "--systems", "1", "--seq", "16", "--quiet"])
tgt("orbits eval (val_000000.bin)", "shard", "orb/val_000000.bin", "orb", "--data", ["orbits", "eval", "--model", F + "/morb", "--data", "{W}/orb", "--seq", "16", "--quiet"])
tgt("orbits eval (val_systems.bin)", "orbmeta", "orb/val_systems.bin", "orb", "--data", ["orbits", "eval", "--model", F + "/morb", "--data", "{W}/orb", "--seq", "16", "--quiet"])
tgt("orbits oracle (force_systems.bin)", "orbmeta", "orb/force_systems.bin", "orb", "--data", ["orbits", "oracle", "--data", "{W}/orb", "--out", "{O}/or", "--keep", "50"] + T1)
tgt("orbits oracle (force_state.bin)", "orbstate", "orb/force_state.bin", "orb", "--data", ["orbits", "oracle", "--data", "{W}/orb", "--out", "{O}/or", "--keep", "50"] + T1)
tgt("orbits probe (force_000000.bin)", "shard", "orb/force_000000.bin", "orb", "--data", ["orbits", "probe", "--model", F + "/morb", "--data", "{W}/orb", "--out", "{O}/pr", "--steps", "1", "--batch", "1", "--keep", "20", "--quiet"] + T1)
tgt("orbits probe (force_state.bin)", "orbstate", "orb/force_state.bin", "orb", "--data", ["orbits", "probe", "--model", F + "/morb", "--data", "{W}/orb", "--out", "{O}/pr", "--steps", "1", "--batch", "1", "--keep", "20", "--quiet"] + T1)
tgt("orbits probe --model", "safetensors", "morb/model.safetensors", "morb", "--model", ["orbits", "probe", "--model", "{W}/morb", "--data", F + "/orb", "--out", "{O}/pr", "--steps", "1", "--batch", "1", "--keep", "20", "--quiet"] + T1)
tgt("orbits newton --forces", "csv", "forces.csv", None, "--forces", ["orbits", "newton", "--forces", "{P}"] + SR)

# ---- mutations: a list of (description, how) per file; how is bytes, or "missing", "dir", "devnull"
HUGE32 = [0, -1, 1, 2, 3, 255, 65535, 65536, 2**31 - 1, -2**31, 1000000007]
HUGE64 = [0, -1, 1, 2**31, 2**32, 2**40, 2**62, 2**63 - 1, -2**63]
NUMS = [b"0", b"-1", b"1", b"4294967296", b"4294967295", b"18446744073709551615", b"99999999999999999999999", b"1e308", b"-1e308",
        b"2.5", b"nan", b"1e-400", b"9007199254740993", b"-9223372036854775808", b"2147483648"]

def generic(data, r):
    out = [("empty", b""), ("missing", "missing"), ("a directory", "dir"), ("/dev/null", "devnull"),
           ("random bytes, same size", bytes(r.randrange(256) for _ in range(len(data)))),
           ("17 random bytes", bytes(r.randrange(256) for _ in range(17))),
           ("a JSON object", b'{"error": "not this file", "size": 99999999999}\n'),
           ("a token shard", open(F + "/val.bin", "rb").read()),
           ("one byte", data[:1]), ("all zero bytes", bytes(len(data))),
           ("doubled", data + data), ("garbage appended", data + bytes(r.randrange(256) for _ in range(100)))]
    return out

def rand_mut(data, r):
    k = r.randrange(4)
    if k == 0 and len(data) > 1:
        n = r.randrange(1, len(data)); return ("truncated to %d bytes" % n, data[:n])
    if k == 1:
        b = bytearray(data); m = r.choice([1, 1, 2, 4, 16, 64])
        for _ in range(m):
            if b: b[r.randrange(len(b))] ^= 1 << r.randrange(8)
        return ("%d random bit flips" % m, bytes(b))
    if k == 2:
        b = bytearray(data); m = r.choice([1, 4, 32])
        for _ in range(m):
            if b: b[r.randrange(len(b))] = r.choice([0, 0xff, 0x7f, 0x80, r.randrange(256)])
        return ("%d random bytes set" % m, bytes(b))
    i = r.randrange(len(data) + 1) if data else 0
    j = min(len(data), i + r.randrange(1, 64))
    return ("bytes %d..%d deleted" % (i, j), data[:i] + data[j:])

def shard_muts(data, r):
    out = []
    for field, name in ((0, "magic"), (1, "version"), (2, "positions"), (3, "channels")):
        for v in HUGE32:
            b = bytearray(data); struct.pack_into("<i", b, 4 * field, v); out.append(("header %s = %d" % (name, v), bytes(b)))
    n = struct.unpack_from("<i", data, 8)[0]
    for d in (1, -1, 1000):
        b = bytearray(data); struct.pack_into("<i", b, 8, n + d); out.append(("header positions = real %+d" % d, bytes(b)))
    out.append(("tokens all 0xffff", data[:1024] + b"\xff" * (len(data) - 1024)))
    out.append(("header only", data[:1024])); out.append(("header - 1 byte", data[:1023])); out.append(("odd tail byte", data + b"\x00"))
    out.append(("header positions = 0, no tokens", data[:8] + struct.pack("<i", 0) + data[12:1024]))
    return out

def st_split(data):
    (hl,) = struct.unpack_from("<Q", data, 0)
    return data[8:8 + hl], data[8 + hl:]

def st_join(h, rest): return struct.pack("<Q", len(h)) + h + rest

def safetensors_muts(data, r):
    out = []
    for v in HUGE64 + [len(data), len(data) - 7, len(data) - 8]:
        b = bytearray(data); struct.pack_into("<q", b, 0, v); out.append(("header length = %d" % v, bytes(b)))
    return out

def safetensors_rand(data, r):
    h, rest = st_split(data)
    k = r.randrange(6)
    if k <= 2:   # a number in the JSON header
        nums = [m for m in re.finditer(rb"-?\d+(\.\d+)?([eE][-+]?\d+)?", h)]
        m = r.choice(nums); v = r.choice(NUMS)
        return ("header number at %d (%s) -> %s" % (m.start(), m.group().decode(), v.decode()), st_join(h[:m.start()] + v + h[m.end():], rest))
    if k == 3:   # a string
        strs = [m for m in re.finditer(rb'"[^"]*"', h)]
        m = r.choice(strs); v = r.choice([b'""', b'"F16"', b'"I64"', b'"BF16"', b'"U8"', b'"x"' * 1, b'"' + b"A" * 5000 + b'"', b'null', b'[]', b'{}', b'1'])
        return ("header string at %d (%s) -> %s" % (m.start(), m.group()[:30].decode(errors="replace"), v[:20].decode()), st_join(h[:m.start()] + v + h[m.end():], rest))
    if k == 4:   # one JSON character deleted / duplicated
        i = r.randrange(len(h))
        if r.randrange(2): return ("header byte %d deleted" % i, st_join(h[:i] + h[i + 1:], rest))
        return ("header byte %d doubled" % i, st_join(h[:i + 1] + h[i:], rest))
    # shape arrays
    shapes = [m for m in re.finditer(rb'"shape":\[[^\]]*\]', h)]
    if not shapes: return rand_mut(data, r)
    m = r.choice(shapes); v = r.choice([b'"shape":[]', b'"shape":[0]', b'"shape":[-1]', b'"shape":[4294967296,4294967296]', b'"shape":[1,1,1,1,1,1,1,1,1,1]', b'"shape":[3037000500,3037000500]', b'"shape":["a"]'])
    return ("%s -> %s" % (m.group().decode(), v.decode()), st_join(h[:m.start()] + v + h[m.end():], rest))

def text_muts(data, r):
    lines = data.split(b"\n")
    out = [("NUL bytes inserted", data[:len(data) // 2] + b"\x00\x00\x00" + data[len(data) // 2:]),
           ("a 300000-byte line", data + b"x" * 300000 + b"\n"), ("invalid UTF-8", data[:10] + b"\xc3\x28\xa0\xa1\xf0\x28\x8c\xbc\xff\xfe" + data[10:]),
           ("CRLF line ends", data.replace(b"\n", b"\r\n")), ("first line only", lines[0] + b"\n"), ("no final newline", data.rstrip(b"\n")),
           ("only newlines", b"\n" * 100), ("one space", b" ")]
    return out

def text_rand(data, r):
    k = r.randrange(3)
    if k == 0:
        nums = list(re.finditer(rb"-?\d+(\.\d+)?([eE][-+]?\d+)?", data))
        if nums:
            m = r.choice(nums); v = r.choice(NUMS + [b"", b"abc", b"1,2", b"inf", b"-inf", b"0x10", b"1e9999"])
            return ("number at %d -> '%s'" % (m.start(), v.decode()), data[:m.start()] + v + data[m.end():])
    if k == 1:
        lines = data.split(b"\n"); i = r.randrange(len(lines))
        v = r.choice([b"", b",,,,", b"1,2,3,4,5,6,7,8,9,10", b'"', b"\x00", b",".join([b"1"] * 2000), lines[0]])
        lines[i] = v
        return ("line %d -> %r" % (i + 1, v[:20]), b"\n".join(lines))
    return rand_mut(data, r)

def csv_muts(data, r):
    lines = data.split(b"\n")
    return text_muts(data, r) + [("header only", lines[0] + b"\n"), ("header twice", lines[0] + b"\n" + data),
           ("an empty column name", b"," + data.replace(b"\n", b"\n1,", 1)),
           ("a row with one column more", b"\n".join(lines[:3] + [lines[3] + b",7"] + lines[4:])),
           ("a row with one column fewer", b"\n".join(lines[:3] + [lines[3].rsplit(b",", 1)[0]] + lines[4:])),
           ("NaN values", data.replace(b"\n1", b"\nnan", 3)), ("inf values", data.replace(b"\n2", b"\ninf", 3)),
           ("10000 columns", b",".join(b"c%d" % i for i in range(10000)) + b"\n" + b",".join([b"1"] * 10000) + b"\n")]

def json_muts(data, r):
    return [("truncated in half", data[:len(data) // 2]), ("[]", b"[]"), ("null", b"null"), ("a number", b"12"), ("a string", b'"x"'),
            ("deep nesting", b"[" * 100000 + b"]" * 100000), ("NUL inside", data[:len(data) // 2] + b"\x00" + data[len(data) // 2:])]

def json_rand(data, r):
    k = r.randrange(4)
    if k <= 1:
        nums = list(re.finditer(rb"-?\d+(\.\d+)?([eE][-+]?\d+)?", data))
        if nums:
            m = r.choice(nums); v = r.choice(NUMS + [b'"7"', b"[]", b"{}", b"null", b"true"])
            return ("JSON number at %d (%s) -> %s" % (m.start(), m.group().decode(), v.decode()), data[:m.start()] + v + data[m.end():])
    if k == 2:
        strs = list(re.finditer(rb'"[^"]*"', data))
        if strs:
            m = r.choice(strs); v = r.choice([b'""', b"1", b"null", b"[]", b"{}", b'"' + b"A" * 70000 + b'"', b'"\\u0000"', b'"\\ud800"'])
            return ("JSON string at %d (%s) -> %s" % (m.start(), m.group()[:30].decode(errors="replace"), v[:20].decode()), data[:m.start()] + v + data[m.end():])
    return rand_mut(data, r)

def jsonl_muts(data, r):
    lines = data.split(b"\n")
    return json_muts(data, r) + text_muts(data, r) + [("an empty line in the middle", b"\n".join(lines[:2] + [b""] + lines[2:])),
           ("a line that is not JSON", b"\n".join(lines[:2] + [b"not json"] + lines[2:])),
           ("a JSON number line", b"\n".join(lines[:2] + [b"42"] + lines[2:])), ("a 1 MB string line", data + b'"' + b"a" * 1000000 + b'"\n')]

def orbmeta_muts(data, r):
    out = []
    for off, name, fmt, vals in ((8, "version", "<i", HUGE32), (12, "record_size", "<i", HUGE32), (16, "systems", "<q", HUGE64),
                                 (32, "preset", "<i", [-1, 2, 2**31 - 1]), (36, "two_body", "<i", [-1, 2]), (40, "rows", "<i", HUGE32), (44, "steps", "<i", HUGE32),
                                 (64, "system 0 K", "<i", [0, -1, 2, 10, 11, 1000, 2**31 - 1, -2**31]), (68, "system 0 dt_token", "<i", [0, -1, 7002, 65535, 2**31 - 1]),
                                 (64 + 56, "system 0 fix_planet", "<i", [-2, 10, 11, 2**31 - 1]), (64 + 60, "system 0 fix_step", "<i", [-2, 500, 2**31 - 1])):
        if off + struct.calcsize(fmt) > len(data): continue
        for v in vals:
            b = bytearray(data); struct.pack_into(fmt, b, off, v); out.append(("%s = %d" % (name, v), bytes(b)))
    for v in (b"nan", b"inf", b"neg", b"zero"):
        b = bytearray(data); dv = {b"nan": float("nan"), b"inf": float("inf"), b"neg": -1.0, b"zero": 0.0}[v]
        for off in range(72, min(len(b), 64 + 464), 8): struct.pack_into("<d", b, off, dv)
        out.append(("system 0 doubles = %s" % v.decode(), bytes(b)))
    out.append(("header only", data[:64])); out.append(("one record short", data[:-464])); out.append(("half a record more", data + data[64:64 + 232]))
    return out

def orbstate_muts(data, r):
    out = []
    for off, name, fmt, vals in ((8, "version", "<i", HUGE32), (12, "fields", "<i", HUGE32), (16, "systems", "<q", HUGE64), (24, "rows", "<i", HUGE32)):
        for v in vals:
            b = bytearray(data); struct.pack_into(fmt, b, off, v); out.append(("%s = %d" % (name, v), bytes(b)))
    for v in (float("nan"), float("inf"), -1.0, 0.0, 1e38):
        b = bytearray(data)
        for off in range(64, min(len(b), 64 + 48 * 1000 * 2), 4): struct.pack_into("<f", b, off, v)
        out.append(("2 systems' state = %g" % v, bytes(b)))
    out.append(("header only", data[:64])); out.append(("one row short", data[:-48]))
    return out

FIXED = {"shard": shard_muts, "safetensors": safetensors_muts, "text": text_muts, "csv": csv_muts, "json": json_muts, "jsonl": jsonl_muts,
         "orbmeta": orbmeta_muts, "orbstate": orbstate_muts}
RAND = {"safetensors": safetensors_rand, "text": text_rand, "csv": text_rand, "json": json_rand, "jsonl": json_rand}

def mutations(t):
    data = open(os.path.join(F, t["rel"]), "rb").read()
    r = random.Random("%s:%s" % (SEED, t["name"]))
    n = t["n"] or N
    fixed = generic(data, r) + FIXED[t["kind"]](data, r)
    base = fixed[:12]; rest = fixed[12:]
    r.shuffle(rest)
    out = base + rest
    if len(out) > n:   # keep the generic ones, sample the rest
        out = base + rest[:max(0, n - len(base))]
    while len(out) < n:
        fn = RAND.get(t["kind"], lambda d, rr: rand_mut(d, rr))
        try: out.append(fn(data, r) if r.randrange(3) else rand_mut(data, r))
        except (IndexError, ValueError): out.append(rand_mut(data, r))
    return out

SANRE = re.compile(r"AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|==\d+== ERROR SUMMARY: [1-9]|definitely lost: [1-9]")
counter = [0]; lock = threading.Lock()

def run_one(t, i, desc, how):
    with lock: counter[0] += 1; k = counter[0]
    W = os.path.join(WORK, "r%05d" % k); os.makedirs(W)
    O = os.path.join(W, "out"); os.makedirs(O)
    if t["folder"]:
        # files over 64 KB are linked (symbolically: a command replaces files atomically, never writes into them)
        def cp(src, dst):
            if os.path.getsize(src) > 65536: os.symlink(src, dst)
            else: shutil.copy2(src, dst)
        shutil.copytree(os.path.join(F, t["folder"]), os.path.join(W, t["folder"]), symlinks=True, copy_function=cp)
        P = os.path.join(W, t["rel"])
    else:
        P = os.path.join(W, os.path.basename(t["rel"]))
    if os.path.lexists(P): os.remove(P)
    if how == "dir": os.makedirs(P)
    elif how == "devnull": os.symlink("/dev/null", P)
    elif how != "missing":
        with open(P, "wb") as f: f.write(how)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", LSSAR_DATA=F)   # runs start in W: the GPT-2 files are F/gpt2
    argv = []
    for a in t["argv"]:
        a = a.replace("{P}", P).replace("{W}", W).replace("{O}", O)
        if a.startswith("@"): kv = a[1:].split("=", 1); env[kv[0]] = kv[1]
        else: argv.append(a)
    cmd = [LSSAR] + argv
    if VG:
        cmd = ["valgrind", "-q", "--error-exitcode=99", "--leak-check=full", "--errors-for-leak-kinds=definite", "--show-leak-kinds=definite",
               "--suppressions=" + SUPP, "--num-callers=30"] + cmd
    def limits():
        if not VG and not SAN and VMEM > 0:
            resource.setrlimit(resource.RLIMIT_AS, (VMEM << 20, VMEM << 20))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        os.setsid()
    logf = open(os.path.join(W, "log"), "w+b")
    t0 = time.time()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, env=env, preexec_fn=limits, cwd=W)
    timed_out = [False]
    def kill():
        timed_out[0] = True
        try: os.killpg(p.pid, signal.SIGKILL)
        except OSError: pass
    timer = threading.Timer(TIMEOUT, kill); timer.start()
    _, status, ru = os.wait4(p.pid, 0)
    timer.cancel(); p.returncode = 0
    dt = time.time() - t0
    logf.seek(0); out = logf.read().decode(errors="replace"); logf.close()
    rss = ru.ru_maxrss / 1024.0   # MiB
    why = None
    if timed_out[0]: why = "timed out after %.0f s" % TIMEOUT
    elif os.WIFSIGNALED(status): why = "killed by signal %d (%s)" % (os.WTERMSIG(status), signal.Signals(os.WTERMSIG(status)).name)
    rc = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
    if not why:
        if VG and rc == 99: why = "valgrind reported errors"
        elif rc not in (0, 1, 2) and not (rc == 3 and argv[0] == "train"): why = "exit status %d" % rc   # train: 3 = stopped on NaN (documented)
        elif SANRE.search(out): why = "sanitizer/valgrind report"
        elif re.search(r"out of memory|cannot allocate|std::bad_alloc", out, re.I): why = "an allocation failed under the %d MB limit (size taken from the file?)" % VMEM
        elif rss > RSS_MB: why = "peak RSS %.0f MB > %d MB" % (rss, RSS_MB)
        elif rc in (1, 2):
            names = [os.path.basename(t["rel"]), t["flag"]]
            if not any(n in out for n in names): why = "exit %d without naming %s" % (rc, " or ".join(names))
    res = dict(t=t["name"], i=i, desc=desc, rc=rc, why=why, dt=dt, rss=rss, out=out, cmd=" ".join(cmd))
    if why and KEEP:
        os.makedirs(KEEP, exist_ok=True)
        kp = os.path.join(KEEP, re.sub(r"[^A-Za-z0-9]+", "_", t["name"]) + "_%03d" % i)
        if isinstance(how, bytes): open(kp, "wb").write(how)
        open(kp + ".txt", "w").write("%s\n%s\n%s\n" % (desc, res["cmd"], out))
    shutil.rmtree(W, ignore_errors=True)
    return res

targets = [t for t in T if not ONLY or re.search(ONLY, t["name"])]
if not targets:
    print(f"not ok - BADINPUT_ONLY={ONLY!r} matches no target (names: {', '.join(t['name'] for t in T)})")
    print("test_badinput: 0 passed, 1 failed")
    sys.exit(1)
jobs = [(t, i, d, h) for t in targets for i, (d, h) in enumerate(mutations(t))]
t0 = time.time()
results = {}
with cf.ThreadPoolExecutor(JOBS) as ex:
    for res in ex.map(lambda a: run_one(*a), jobs):
        results.setdefault(res["t"], []).append(res)
passed = failed = 0
worst_rss = (0, ""); worst_dt = (0, ""); codes = {}
for t in targets:
    rs = results.get(t["name"], [])
    bad = [x for x in rs if x["why"]]
    for x in rs:
        codes[x["rc"]] = codes.get(x["rc"], 0) + 1
        if x["rss"] > worst_rss[0]: worst_rss = (x["rss"], "%s: %s" % (x["t"], x["desc"]))
        if x["dt"] > worst_dt[0]: worst_dt = (x["dt"], "%s: %s" % (x["t"], x["desc"]))
    ok = sum(1 for x in rs if x["rc"] == 0)
    if bad:
        failed += 1
        print("not ok - %s: %d of %d mutations fail" % (t["name"], len(bad), len(rs)))
        for x in bad[:6]:
            print("    [%d] %s: %s" % (x["i"], x["desc"], x["why"]))
            for l in x["out"].strip().splitlines()[-4:]: print("        " + l[:200])
    else:
        passed += 1
        print("ok - %s (%d mutations, %d exit 0)" % (t["name"], len(rs), ok))
print("# %d runs in %.1f s (%d jobs%s); exit codes %s; peak RSS %.0f MB (%s); slowest %.1f s (%s)" % (
    len(jobs), time.time() - t0, JOBS, ", valgrind" if VG else "", dict(sorted(codes.items())), worst_rss[0], worst_rss[1], worst_dt[0], worst_dt[1]))
shutil.rmtree(WORK, ignore_errors=True)
print("test_badinput: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
PY
