#!/usr/bin/env python3
"""test_gpt2_torch_bench.py - the CPU smoke test of scripts/gpt2_torch_bench.py (the PyTorch GPT-2
training step that scripts/gpu-check.sh times on a GPU) and of scripts/attn_torch.py (its LSSAR,
shared with gpu_attn_torch.py): a tiny model runs eager (and compiled where torch has
torch.compile, else the row says skipped), the JSON parses and holds the documented keys with
consistent numbers (parameter count, FLOPs, tokens/s, a first loss near ln V), bad arguments
exit 2, --device cuda without a GPU skips; and attn_torch's LSSAR and softmax agree with the
float64 reference tests/torch_ref.py to the spec's fp32 bound 1e-4 (negative control: p = 14
instead of 15 must not). Skips (0 passed, 0 failed) without torch."""
import json
import math
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "gpt2_torch_bench.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "tests"))
passed = failed = 0


def check(cond, name, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok - " + name)
    else:
        failed += 1
        print("not ok - %s %s" % (name, str(detail)[-1500:]))


def run(*a):
    return subprocess.run([sys.executable, SCRIPT, *a], capture_output=True, text=True, timeout=600)


def main():
    try:
        import torch
    except ImportError as e:
        print("SKIP: no torch (%s)" % e)
        print("test_gpt2_torch_bench: 0 passed, 0 failed")
        return 0
    import attn_torch
    import torch_ref

    # 1. attn_torch against the float64 reference (relative error over the whole tensor)
    g = torch.Generator().manual_seed(5)
    B, T, H, D = 2, 40, 3, 16
    q, k, v = (torch.randn(B, T, H, D, generator=g, dtype=torch.float64) * s for s in (1.5, 1.0, 1.0))
    rel = lambda a, b: float((a.double() - b).norm() / b.norm())  # noqa: E731
    for kind, fn in (("lssar", attn_torch.lssar_plain), ("softmax", attn_torch.softmax_plain)):
        ref = torch_ref.attention(q, k, v, kind)
        e = rel(fn(q.float(), k.float(), v.float()), ref)
        check(e <= 1e-4, "attn_torch %s vs torch_ref float64: rel %.2e <= 1e-4" % (kind, e))
    e = rel(attn_torch.lssar_plain(q.float(), k.float(), v.float(), p=14.0), torch_ref.attention(q, k, v, "lssar"))
    check(e > 1e-4, "negative control: LSSAR with p = 14 differs (rel %.2e > 1e-4)" % e)

    # 2. a tiny model end to end; the JSON parses and is consistent
    tmp = tempfile.mkdtemp(prefix="lssar_t2b_")
    js = os.path.join(tmp, "b.json")
    L, C, Hh, V, Bb, Tt = 2, 64, 2, 257, 2, 32
    p = run("--device", "cpu", "--layers", str(L), "--dim", str(C), "--heads", str(Hh), "--vocab", str(V),
            "--batch", str(Bb), "--seq", str(Tt), "--attn", "softmax,lssar", "--modes", "eager,compile",
            "--warmup", "1", "--iters", "2", "--threads", "1", "--json", js)
    check(p.returncode == 0, "tiny run on the CPU exits 0", p.stdout + p.stderr)
    try:
        with open(js) as f:
            d = json.load(f)
    except Exception as e:  # noqa: BLE001 - malformed or missing JSON fails the test
        check(False, "JSON parses", e)
        d = None
    if d is not None:
        check(d["skipped"] is False and d["device"] == "cpu" and d["config"]["batch"] == Bb and d["config"]["seq"] == Tt,
              "JSON: device and config", d.get("config"))
        N = L * (12 * C * C + 13 * C) + V * C + Tt * C + 2 * C   # blocks, tied wte, wpe, ln_f
        check(d["params"] == N, "parameter count %s == %d (tied embedding once)" % (d.get("params"), N))
        flop = (6 * N + 12 * L * C * Tt) * Bb * Tt
        check(abs(d["flop_per_step"] - flop) <= 1e-9 * flop, "FLOPs/step = (6 N + 12 L C T) B T")
        rows = {(r["attn"], r["mode"]): r for r in d["results"]}
        check(set(rows) == {(a, m) for a in ("softmax", "lssar") for m in ("eager", "compile")}, "one row per kind and mode", rows.keys())
        keys = ("ms_per_step", "ms_p10", "ms_p90", "tokens_per_s", "tflops", "mfu", "peak_memory_bytes", "loss_first", "loss_last")
        for (a, m), r in sorted(rows.items()):
            if m == "compile" and not hasattr(torch, "compile"):
                check(r["status"] == "skipped" and "torch.compile" in r["reason"], "%s %s: skipped, saying why" % (a, m), r)
                continue
            ok = r["status"] == "ok" and all(k_ in r for k_ in keys)
            ok = ok and abs(r["tokens_per_s"] - Bb * Tt / (r["ms_per_step"] * 1e-3)) <= 1e-6 * r["tokens_per_s"]
            ok = ok and r["ms_p10"] <= r["ms_per_step"] <= r["ms_p90"] and r["mfu"] is None and r["peak_memory_bytes"] > 1e6
            # GPT-2 initialisation: logits near 0, so the first loss is near ln V
            ok = ok and abs(r["loss_first"] - math.log(V)) < 0.3 and math.isfinite(r["loss_last"])
            check(ok, "%s %s: ok, keys, tokens/s, quantiles, first loss %.3f near ln V = %.3f" % (a, m, r.get("loss_first", float("nan")), math.log(V)), r)
    # --peak-tflops gives MFU on the CPU
    p = run("--device", "cpu", "--layers", "1", "--dim", "32", "--heads", "2", "--vocab", "64", "--batch", "1",
            "--seq", "8", "--modes", "eager", "--warmup", "0", "--iters", "1", "--threads", "1", "--peak-tflops", "0.25", "--json", js)
    try:
        r = json.load(open(js))["results"][0]
        check(p.returncode == 0 and abs(r["mfu"] - r["tflops"] / 0.25) < 1e-12, "--peak-tflops: mfu = TFLOP/s / peak")
    except Exception as e:  # noqa: BLE001
        check(False, "--peak-tflops run", (e, p.stdout, p.stderr))

    # 3. bad arguments; no GPU
    p = run("--attn", "nope", "--device", "cpu")
    check(p.returncode == 2 and "--attn" in p.stderr, "--attn nope: exit 2, says --attn", p.stderr)
    p = run("--dim", "30", "--heads", "4", "--device", "cpu")
    check(p.returncode == 2 and "multiple" in p.stderr, "--dim not a multiple of --heads: exit 2", p.stderr)
    if not torch.cuda.is_available():
        p = run("--device", "cuda", "--json", js)
        try:
            sk = json.load(open(js))
        except Exception:  # noqa: BLE001
            sk = {}
        check(p.returncode == 0 and p.stdout.startswith("SKIP: no CUDA GPU") and sk.get("skipped") is True,
              "--device cuda without a GPU: SKIP, exit 0, skipped JSON", p.stdout + p.stderr)
    print("test_gpt2_torch_bench: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
