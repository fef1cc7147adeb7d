#!/usr/bin/env bash
# tests/gpu/fake_selftest.sh BUILD - `make test-gpu-fake`: checks the GPU test program and the
# GPU benchmark THEMSELVES on a machine without a GPU, through tests/gpu/fake_cuda.c (the CUDA
# backend's CPU emulations behind the backend table, host memory behind cudaMalloc). It says
# nothing about the CUDA kernels; it shows that test_gpu passes a correct backend, catches a
# wrong, an unwritten and a non-deterministic result, prints the one SKIP line without a device,
# and writes JSON that parses; and that gpu_attn runs, times and writes its JSON. The train group
# (the trainer end to end) cannot run on the fake: it must say so; FAKE_SELFTEST_TRAIN=1 also
# dry-runs its logic with the "GPU" side on the CPU (LSSAR_GPU_TRAIN_DEVICE=cpu; minutes).
set -u
B=${1:-build}
T=$B/tests/gpu/test_gpu_fake
G=$B/tests/gpu/gpu_attn_fake
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "${2:-}" ] && printf '%s\n' "$2" | tail -15 | sed 's/^/    /'; }
for f in "$T" "$G"; do [ -x "$f" ] || { echo "fake_selftest: $f is missing (make test-gpu-fake builds it)"; echo "fake_selftest: 0 passed, 1 failed"; exit 1; }; done
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

# 1. a correct backend passes, and the JSON lines parse
out=$(LSSAR_GPU_QUICK=1 LSSAR_GPU_JSON="$tmp/q.jsonl" "$T" 2>&1); rc=$?
line=$(grep -E '^test_gpu: [0-9]+ passed, 0 failed' <<<"$out")
n=$(sed -E 's/^test_gpu: ([0-9]+) passed.*/\1/' <<<"$line")
if [ $rc -eq 0 ] && [ -n "$line" ] && [ "$n" -ge 500 ]; then ok "quick run on the emulation: $line"; else bad "quick run on the emulation (exit $rc)" "$(grep -E '^FAIL|^FATAL|^test_gpu' <<<"$out")"; fi
if python3 - "$tmp/q.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert rows[-1].get("summary") and rows[-1]["failed"] == 0, rows[-1]
assert sum(1 for r in rows if "pass" in r) == rows[-1]["passed"]
EOF
then ok "LSSAR_GPU_JSON: every line parses, one per check, summary last"; else bad "LSSAR_GPU_JSON"; fi
if grep -q '^SKIP group train (a build with tests/gpu/fake_cuda.c' <<<"$out"; then ok "group train: skipped on the fake, saying why"; else bad "group train: no SKIP line on the fake" "$(grep -i train <<<"$out")"; fi
# the train group's own logic, its "GPU" side on the CPU (minutes on 2 cores: FAKE_SELFTEST_TRAIN=1)
if [ "${FAKE_SELFTEST_TRAIN:-0}" = 1 ]; then
  out=$(LSSAR_GPU_QUICK=1 LSSAR_GPU_ONLY=train LSSAR_GPU_TRAIN_DEVICE=cpu "$T" 2>&1); rc=$?
  if [ $rc -eq 0 ] && grep -qE '^test_gpu: 2[0-9] passed, 0 failed' <<<"$out" && grep -q '^ok   train lssar: negative control' <<<"$out"; then
    ok "group train dry run on the CPU: $(grep '^test_gpu:' <<<"$out")"
  else bad "group train dry run on the CPU (exit $rc)" "$(grep -E '^FAIL|^FATAL|^test_gpu' <<<"$out")"; fi
fi

# 2. no device: one SKIP line, exit 0
out=$(FAKE_CUDA_BREAK=nodevice "$T" 2>&1); rc=$?
if [ $rc -eq 0 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && grep -q '^SKIP: no CUDA GPU (' <<<"$out"; then ok "no device: '$out'"; else bad "no device (exit $rc)" "$out"; fi

# 3. injected faults are caught (the groups that exercise them, quick mode)
while read -r fault groups pattern; do
  out=$(LSSAR_GPU_QUICK=1 LSSAR_GPU_ONLY="$groups" FAKE_CUDA_BREAK="$fault" "$T" 2>&1); rc=$?
  if [ $rc -eq 1 ] && grep -E '^FAIL' <<<"$out" | grep -qE "$pattern"; then
    ok "fault $fault caught ($(grep -cE '^FAIL' <<<"$out") checks fail, e.g. $(grep -E '^FAIL' <<<"$out" | grep -E "$pattern" | head -1 | cut -c1-110))"
  else
    bad "fault $fault caught (exit $rc)" "$(grep -E '^FAIL|^test_gpu' <<<"$out")"
  fi
done <<'EOF'
perturb:matmul_forward matmul matmul_forward
unwritten:gelu_forward elementwise gelu_forward.*non-finite
perturb:layernorm_forward layernorm layernorm_forward.*out
perturb:attention_forward attention attention (fp32|bf16) .* out
perturb:attention_backward attention attention (fp32|bf16) .* dq
unwritten:attention_backward attention dq.*non-finite
nondet:attention_backward attention deterministic
perturb:api_forward api api (f32|bf16)-storage .* out
EOF

# 3b. a sticky CUDA error: FATAL, exit 2, and the groups that did not run named
out=$(LSSAR_GPU_QUICK=1 LSSAR_GPU_ONLY=mem,matmul,elementwise,rope FAKE_CUDA_BREAK=fatal:gelu_forward "$T" 2>&1); rc=$?
if [ $rc -eq 2 ] && grep -qE '^FATAL .*group elementwise; remaining groups: rope\)' <<<"$out"; then ok "sticky error: $(grep -m1 '^FATAL' <<<"$out" | cut -c1-140)"
else bad "sticky error (exit $rc)" "$(grep -E '^FATAL|^test_gpu' <<<"$out")"; fi

# 4. the benchmark: runs, times, writes JSON; and skips without a device
out=$("$G" --T 128,256 --tokens 256 --heads 2 --iters 2 --warmup 1 --json "$tmp/b.json" 2>&1); rc=$?
if [ $rc -eq 0 ] && python3 - "$tmp/b.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
assert not j["skipped"] and len(j["results"]) == 6 and all(r["valid"] and r["fwdbwd_ms"] > 0 for r in j["results"]), j
assert len(j["memory"]) == 2 and all(m["workspace_per_token_head_bytes"]["lssar"] > 0 for m in j["memory"])
EOF
then ok "gpu_attn on the emulation: 6 rows, JSON parses"; else bad "gpu_attn on the emulation (exit $rc)" "$out"; fi
out=$(FAKE_CUDA_BREAK=nodevice "$G" --json "$tmp/b2.json" 2>&1); rc=$?
if [ $rc -eq 0 ] && grep -q '^SKIP: no CUDA GPU (' <<<"$out" && grep -q '"skipped": true' "$tmp/b2.json"; then ok "gpu_attn without a device: SKIP and skipped JSON"; else bad "gpu_attn without a device (exit $rc)" "$out"; fi

echo "fake_selftest: $pass passed, $fail failed"
[ $fail -eq 0 ]
