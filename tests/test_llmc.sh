#!/usr/bin/env bash
# test_llmc.sh - `lssar export/import --format llmc` (llm.c's GPT-2 model file, src/model/llmc.h):
# the header and the parameter order at known offsets, a round trip that gives bit-identical
# tensors and the same eval loss, a bfloat16 (version 5) file, and clear refusals (another model
# shape, a token shard, a truncated file, an unknown format). Binary: $LSSAR_BIN, else build/lssar.
cd "$(dirname "$0")/.." || exit 1
LSSAR=${LSSAR_BIN:-build/lssar}
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | tail -6 | sed 's/^/    /'; }
tmp=$(mktemp -d /tmp/lssar_llmc_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
T1="--threads 1 --quiet --no-plot"
"$LSSAR" data synth --tokens 6000 --alphabet 15 --out "$tmp/s.bin" >/dev/null 2>&1
M="--data $tmp/s.bin --layers 2 --heads 2 --dim 32 --seq 32 --batch 2 --steps 4"
"$LSSAR" train $M --pos learned --attn softmax --out "$tmp/gpt2" $T1 >/dev/null 2>&1
"$LSSAR" train $M --attn softmax --out "$tmp/rope" $T1 >/dev/null 2>&1
"$LSSAR" train $M --pos learned --attn lssar --out "$tmp/lssar" $T1 >/dev/null 2>&1

out=$("$LSSAR" export --format llmc --model "$tmp/gpt2" --out "$tmp/m.bin" 2>&1); rc=$?
[ $rc -eq 0 ] && [ -s "$tmp/m.bin" ] && ok "export --format llmc" || bad "export --format llmc (exit $rc)" "$out"
# header and layout: every tensor at llm.c's offset (vocabulary 16 padded to 128)
if python3 - "$tmp/m.bin" "$tmp/gpt2/model.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
h = struct.unpack("<256i", b[:1024])
assert h[:8] == (20240326, 3, 32, 16, 2, 2, 32, 128), h[:8]
st = open(sys.argv[2], "rb").read(); n = struct.unpack("<Q", st[:8])[0]; hd = json.loads(st[8:8 + n]); base = 8 + n
def tensor(name):
    t = hd[name]; s, e = t["data_offsets"]; return st[base + s:base + e]
L, C, V, Vp, T = 2, 32, 16, 128, 32
order = [("wte.0", Vp * C), ("wpe", T * C)]
for k, size in [("ln_1.weight", C), ("ln_1.bias", C), ("attn.c_attn.weight", 3 * C * C), ("attn.c_attn.bias", 3 * C),
                ("attn.c_proj.weight", C * C), ("attn.c_proj.bias", C), ("ln_2.weight", C), ("ln_2.bias", C),
                ("mlp.c_fc.weight", 4 * C * C), ("mlp.c_fc.bias", 4 * C), ("mlp.c_proj.weight", 4 * C * C), ("mlp.c_proj.bias", C)]:
    order += [("h.%d.%s" % (l, k), size) for l in range(L)]
order += [("ln_f.weight", C), ("ln_f.bias", C)]
off = 1024
for name, size in order:
    got = b[off:off + 4 * size]
    want = tensor(name)
    if name == "wte.0":
        assert got[:len(want)] == want and got[len(want):] == bytes(4 * (Vp - V) * C), name
    else:
        assert got == want, name
    off += 4 * size
assert off == len(b), (off, len(b))
PY
then ok "header (magic, version 3, maxT, V, L, NH, C, Vp 128) and every tensor at llm.c's offset, padding rows 0"; else bad "llm.c layout"; fi

out=$("$LSSAR" import --format llmc --in "$tmp/m.bin" --out "$tmp/back" 2>&1); rc=$?
[ $rc -eq 0 ] && [ -f "$tmp/back/model.safetensors" ] && ok "import --format llmc" || bad "import --format llmc (exit $rc)" "$out"
if python3 - "$tmp/gpt2/model.safetensors" "$tmp/back/model.safetensors" <<'PY'
import json, struct, sys
def read(p):
    st = open(p, "rb").read(); n = struct.unpack("<Q", st[:8])[0]; hd = json.loads(st[8:8 + n])
    return {k: st[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in hd.items() if k != "__metadata__"}
a, b = read(sys.argv[1]), read(sys.argv[2])
assert a.keys() == b.keys() and all(a[k] == b[k] for k in a), sorted(k for k in a if a.get(k) != b.get(k))
PY
then ok "round trip: every tensor bit-identical"; else bad "round trip tensors"; fi
# the loss column of eval's table row ("  32  2.7724  ...")
e1=$("$LSSAR" eval --model "$tmp/gpt2" --data "$tmp/s.bin" --seq 32 --threads 1 2>&1 | awk '$1 == 32 { print $2 }')
e2=$("$LSSAR" eval --model "$tmp/back" --data "$tmp/s.bin" --seq 32 --threads 1 2>&1 | awk '$1 == 32 { print $2 }')
[[ "$e1" =~ ^[0-9]+\.[0-9]+$ ]] && [ "$e1" = "$e2" ] && ok "the imported model evaluates as the original (loss $e1)" || bad "eval after the round trip" "'$e1' vs '$e2'"

# bfloat16 (version 5): each float's upper 16 bits
python3 - "$tmp/m.bin" "$tmp/m5.bin" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read(); h = list(struct.unpack("<256i", b[:1024])); h[1] = 5
n = (len(b) - 1024) // 4
f = struct.unpack("<%dI" % n, b[1024:])
open(sys.argv[2], "wb").write(struct.pack("<256i", *h) + struct.pack("<%dH" % n, *(x >> 16 for x in f)))
PY
out=$("$LSSAR" import --format llmc --in "$tmp/m5.bin" --out "$tmp/bf" 2>&1); rc=$?
if [ $rc -eq 0 ] && python3 - "$tmp/gpt2/model.safetensors" "$tmp/bf/model.safetensors" <<'PY'
import json, struct, sys
def read(p):
    st = open(p, "rb").read(); n = struct.unpack("<Q", st[:8])[0]; hd = json.loads(st[8:8 + n])
    return {k: st[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in hd.items() if k != "__metadata__"}
a, b = read(sys.argv[1]), read(sys.argv[2])
for k in a:
    x = struct.unpack("<%dI" % (len(a[k]) // 4), a[k]); y = struct.unpack("<%dI" % (len(b[k]) // 4), b[k])
    assert all(u & 0xFFFF0000 == v for u, v in zip(x, y)), k
PY
then ok "a bfloat16 (version 5) file imports: every weight the float32 one's upper 16 bits"; else bad "bfloat16 import (exit $rc)" "$out"; fi

# refusals
out=$("$LSSAR" export --format llmc --model "$tmp/rope" --out "$tmp/x.bin" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "learned" <<<"$out" && [ ! -e "$tmp/x.bin" ] && ok "a RoPE model is refused (exit 2, says why), nothing written" || bad "export of a RoPE model (exit $rc)" "$out"
out=$("$LSSAR" export --format llmc --model "$tmp/lssar" --out "$tmp/x.bin" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "softmax" <<<"$out" && ok "an lssar-attention model is refused (exit 2)" || bad "export of an lssar model (exit $rc)" "$out"
out=$("$LSSAR" import --format llmc --in "$tmp/s.bin" --out "$tmp/y" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "token shard" <<<"$out" && [ ! -e "$tmp/y/model.safetensors" ] && ok "a token shard is refused, naming it" || bad "import of a token shard (exit $rc)" "$out"
head -c 5000 "$tmp/m.bin" > "$tmp/trunc.bin"
out=$("$LSSAR" import --format llmc --in "$tmp/trunc.bin" --out "$tmp/y" 2>&1); rc=$?
[ $rc -eq 1 ] && grep -q "truncated" <<<"$out" && ok "a truncated file is refused" || bad "import of a truncated file (exit $rc)" "$out"
out=$("$LSSAR" export --format onnx --model "$tmp/gpt2" --out "$tmp/x" 2>&1); rc=$?
[ $rc -eq 2 ] && grep -q "llmc" <<<"$out" && grep -q "hf" <<<"$out" && ok "--format onnx: exit 2 naming the formats there are" || bad "--format onnx (exit $rc)" "$out"
"$LSSAR" export --help 2>&1 | grep -q "llm.c" && "$LSSAR" import --help 2>&1 | grep -q "llm.c" && ok "export and import --help" || bad "export/import --help"
echo "test_llmc: $pass passed, $fail failed"
[ $fail -eq 0 ]
