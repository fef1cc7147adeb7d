#!/usr/bin/env python3
"""gpu_attn_torch.py - the PyTorch side of the GPU attention benchmark (scripts/gpu-check.sh).

Times, on the same GPU and in the same run as bench/gpu_attn.c, at the shapes of
spec/anchors.md (H = 12, D = 64, bf16, 16k tokens per call: T = 1024 / 4096 / 16384 with
B = 16 / 4 / 1):
  - torch SDPA, flash backend, causal: forward, and forward + backward;
  - LSSAR written plainly in PyTorch (the T x T matrix materialised, as public
    reimplementations do), straight from spec/attention.md, forward + backward through autograd,
    at T = 1024 and 4096, and at 16384 only if the memory measured at 4096, scaled by T^2 B,
    fits (else the row says why it was skipped);
  - LSSA and LSSAR in FlexAttention (scripts/flex_attn_torch.py: one call, and two calls whose
    second score_mod uses the first's log-sum-exp), compiled (torch.compile of the whole function), forward
    and forward + backward; first a check of its forward and gradients at a small shape (float32)
    against the float64 reference tests/torch_ref.py (on the CPU: PyTorch runs FlexAttention's
    backward only on the GPU, so this is where the gradients of its kernels are checked).
--impls picks among sdpa, plain and flex (default all three); scripts/gpu-check.sh runs flex as a
step of its own, with its own time limit (compiling the FlexAttention kernels takes a while).
Timing: torch.cuda.Event around the forward and the backward of every iteration, warm-up first,
inputs rotated among several sets (each larger than the L2 at 16k tokens), the median (p10 and
p90 too). Random inputs, never zeros.

With --lib build/liblssar.so (a CUDA build of liblssar), also a cross-check at a small shape:
our lssar_attn_*_cuda (bf16 storage) against the plain-PyTorch LSSAR and our softmax against
SDPA, both measured against a float32 PyTorch computation on the same bf16 inputs.

  gpu_attn_torch.py --json FILE [--iters N] [--warmup N] [--lib PATH] [--T 1024,4096,16384]
                    [--impls sdpa,plain,flex]

Without a GPU or without torch: one line "SKIP: ..." and exit 0 (the JSON says skipped).
"""
import argparse
import json
import sys


def write(path, obj):
    if path:
        with open(path, "w") as f:
            json.dump(obj, f, indent=1)


def skip(path, reason):
    print(f"SKIP: no CUDA GPU for PyTorch ({reason})")
    write(path, {"skipped": True, "reason": reason})
    sys.exit(0)


ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--json", default=None)
ap.add_argument("--iters", type=int, default=30, help="timed iterations for SDPA (plain LSSAR: a third, at least 3)")
ap.add_argument("--warmup", type=int, default=3)
ap.add_argument("--T", default="1024,4096,16384")
ap.add_argument("--tokens", type=int, default=16384)
ap.add_argument("--heads", type=int, default=12)
ap.add_argument("--lib", default=None, help="liblssar.so with the CUDA backend, for the cross-check")
ap.add_argument("--impls", default="sdpa,plain,flex", help="which PyTorch attentions: sdpa, plain, flex")
args = ap.parse_args()
IMPLS = set(args.impls.split(","))

try:
    import torch
    import torch.nn.functional as F
    from attn_torch import lssar_plain, softmax_plain  # scripts/attn_torch.py, beside this file
except Exception as e:  # noqa: BLE001 - any import failure means no torch here
    skip(args.json, f"cannot import torch: {e}")
if not torch.cuda.is_available():
    skip(args.json, f"torch {torch.__version__}: torch.cuda.is_available() is False")

dev = torch.device("cuda")
props = torch.cuda.get_device_properties(0)
H, D, P = args.heads, 64, 15.0
Ts = [int(t) for t in args.T.split(",") if t]
out = {
    "skipped": False,
    "device": {"name": props.name, "sms": props.multi_processor_count, "memory_bytes": props.total_memory},
    "torch": torch.__version__,
    "cuda": torch.version.cuda,
    "config": {"dtype": "bf16", "H": H, "D": D, "tokens_per_call": args.tokens, "warmup": args.warmup,
               "iters": args.iters, "p": P},
    "results": [],
    "notes": [],
}
print(f"gpu_attn_torch: {props.name}, torch {torch.__version__} (CUDA {torch.version.cuda}), H={H} D={D}, "
      f"{args.tokens} tokens per call", flush=True)

try:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    def flash_ctx():
        return sdpa_kernel([SDPBackend.FLASH_ATTENTION])
    sdpa_backend = "flash (torch.nn.attention.sdpa_kernel(FLASH_ATTENTION))"
except Exception as e:  # noqa: BLE001
    import contextlib
    def flash_ctx():
        return contextlib.nullcontext()
    sdpa_backend = f"default (could not force flash: {e})"
    out["notes"].append("SDPA backend not forced to flash: " + str(e))
out["sdpa_backend"] = sdpa_backend


def make_sets(B, T, nsets, requires_grad=True):
    """(q, k, v, dout) sets, (B, T, H, D) bf16, random normal (q scaled 1.5, as bench/gpu_attn.c)."""
    g = torch.Generator(device=dev)
    g.manual_seed(20261201 + T)
    sets = []
    for _ in range(nsets):
        q = (1.5 * torch.randn(B, T, H, D, device=dev, generator=g)).to(torch.bfloat16)
        k = torch.randn(B, T, H, D, device=dev, generator=g).to(torch.bfloat16)
        v = torch.randn(B, T, H, D, device=dev, generator=g).to(torch.bfloat16)
        dy = torch.randn(B, T, H, D, device=dev, generator=g).to(torch.bfloat16)
        for t in (q, k, v):
            t.requires_grad_(requires_grad)
        sets.append((q, k, v, dy))
    return sets


def sdpa(q, k, v):
    # our layout (B, T, H, D); SDPA's is (B, H, T, D): transposed views, no copies
    with flash_ctx():
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
    return y.transpose(1, 2)


def quantiles(v):
    v = sorted(v)
    pick = lambda p: v[min(len(v) - 1, max(0, int(round(p * (len(v) - 1)))))]  # noqa: E731
    return pick(0.5), pick(0.1), pick(0.9)


def time_fwdbwd(fn, sets, warmup, iters):
    for i in range(warmup):
        q, k, v, dy = sets[i % len(sets)]
        q.grad = k.grad = v.grad = None
        fn(q, k, v).backward(dy)
    torch.cuda.synchronize()
    ev = [[torch.cuda.Event(enable_timing=True) for _ in range(3)] for _ in range(iters)]
    for i in range(iters):
        q, k, v, dy = sets[i % len(sets)]
        q.grad = k.grad = v.grad = None
        ev[i][0].record()
        y = fn(q, k, v)
        ev[i][1].record()
        y.backward(dy)
        ev[i][2].record()
    torch.cuda.synchronize()
    f = [e[0].elapsed_time(e[1]) for e in ev]
    t = [e[0].elapsed_time(e[2]) for e in ev]
    for s in sets:
        for x in s[:3]:
            if x.grad is not None and not torch.isfinite(x.grad).all():
                raise RuntimeError("non-finite gradient")
    return quantiles(f), quantiles(t)


def time_fwd(fn, sets, warmup, iters):
    with torch.no_grad():
        for i in range(warmup):
            q, k, v, _ = sets[i % len(sets)]
            fn(q, k, v)
        torch.cuda.synchronize()
        ev = [[torch.cuda.Event(enable_timing=True) for _ in range(2)] for _ in range(iters)]
        for i in range(iters):
            q, k, v, _ = sets[i % len(sets)]
            ev[i][0].record()
            fn(q, k, v)
            ev[i][1].record()
        torch.cuda.synchronize()
    return quantiles([e[0].elapsed_time(e[1]) for e in ev])


def sdpa_flop(B, T):
    return 2.0 * B * H * T * T * D  # causal forward; backward 2.5x


# ---- FlexAttention: LSSA and LSSAR (scripts/flex_attn_torch.py)
flex_note = None
if "flex" in IMPLS:
    try:
        import flex_attn_torch as fx
        if fx.IMPORT_ERROR:
            raise ImportError(fx.IMPORT_ERROR)
        # each function compiled whole (the normalisation, both calls and their score_mods in one
        # graph), as FlexAttention is meant to be used
        compiled = {"lssa": torch.compile(fx.lssa), "lssar": torch.compile(fx.lssar)}
    except Exception as e:  # noqa: BLE001 - no FlexAttention in this torch: the rows say why
        flex_note = f"FlexAttention unavailable: {e!r}"
        print(f"  flex: {flex_note}", flush=True)


def flex_fn(kind, T):
    """(B, T, H, D) -> (B, T, H, D) through the compiled FlexAttention (bf16 operands, fp32 scores
    and softmax, as our kernels); FlexAttention's layout is (B, H, T, D): transposed views."""
    bm = fx.causal_mask(T, dev)

    def fn(q, k, v):
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        y = compiled["lssa"](q, k, v, block_mask=bm) if kind == "lssa" else compiled["lssar"](q, k, v, p=P, block_mask=bm)
        return y.transpose(1, 2)
    return fn


def flex_check():
    """FlexAttention's LSSA / LSSAR (compiled, fp32, on the GPU) against tests/torch_ref.py in
    float64 (on the CPU), forward and gradients, B=1 H=2 T=256 D=64."""
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
    import torch_ref
    g = torch.Generator(device=dev)
    g.manual_seed(35)
    q, k, v, dy = (torch.randn(1, 256, 2, 64, device=dev, generator=g) for _ in range(4))
    res = {}
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False   # fp32 products stay fp32 (the check's bound)
    try:
        for kind in ("lssa", "lssar"):
            leaves = [t.clone().requires_grad_() for t in (q, k, v)]
            y = flex_fn(kind, 256)(*leaves)
            y.backward(dy)
            ref = [t.detach().cpu().double().requires_grad_() for t in (q, k, v)]
            yr = torch_ref.attention(*ref, kind, p=P)
            yr.backward(dy.cpu().double())
            rel = lambda a, b: float((a.detach().cpu().double() - b).norm() / b.norm())  # noqa: E731
            e = {"out": rel(y, yr.detach()), "dq": rel(leaves[0].grad, ref[0].grad), "dk": rel(leaves[1].grad, ref[1].grad),
                 "dv": rel(leaves[2].grad, ref[2].grad)}
            # the spec's float32 bound is 1e-4; 1e-3 leaves room for the kernels' fast exp / log
            res[kind] = {"rel_err": e, "agree": all(x < 1e-3 for x in e.values())}
            print(f"  flex check {kind} (fp32, T=256, vs float64 torch_ref): " + ", ".join(f"{a} {b:.2g}" for a, b in e.items()) +
                  ("" if res[kind]["agree"] else "  DISAGREE (> 1e-3)"), flush=True)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    return res


if "flex" in IMPLS and flex_note is None:
    try:
        out["flex_check"] = flex_check()
    except Exception as e:  # noqa: BLE001 - record and go on to the timings
        out["flex_check"] = {"error": repr(e)}
        print(f"  flex check FAILED: {e!r}", flush=True)
if flex_note:
    out["notes"].append(flex_note)

peak_plain = {}
for T in Ts:
    B = max(1, args.tokens // T)
    # ---- FlexAttention LSSA, LSSAR
    for kind in ("lssa", "lssar") if "flex" in IMPLS else ():
        r = {"impl": f"flex_{kind}", "T": T, "B": B}
        if flex_note:
            r.update(valid=False, skipped=flex_note)
        else:
            try:
                sets = make_sets(B, T, 3)
                fn = flex_fn(kind, T)
                fq = time_fwd(fn, sets, args.warmup, args.iters)
                (f2, t2) = time_fwdbwd(fn, sets, args.warmup, args.iters)
                r.update(valid=True, fwd_ms=fq[0], fwd_p10_ms=fq[1], fwd_p90_ms=fq[2], fwd_in_fwdbwd_ms=f2[0],
                         fwdbwd_ms=t2[0], fwdbwd_p10_ms=t2[1], fwdbwd_p90_ms=t2[2])
                print(f"  flex_{kind:<6} T={T:<5} B={B:<2}  fwd {fq[0]:8.3f} ms  fwd+bwd {t2[0]:8.3f} ms "
                      f"(p10 {t2[1]:.3f}, p90 {t2[2]:.3f})", flush=True)
            except torch.cuda.OutOfMemoryError as e:
                r.update(valid=False, skipped=f"out of memory: {str(e).splitlines()[0]}")
            except Exception as e:  # noqa: BLE001 - record and go on
                r.update(valid=False, error=repr(e)[:2000])
                print(f"  flex_{kind:<6} T={T:<5} B={B:<2}  FAILED: {e!r}"[:500], flush=True)
            sets = None
            torch.cuda.empty_cache()
        out["results"].append(r)
        write(args.json, out)   # a step cut by its time limit keeps what it measured
    # ---- SDPA
    if "sdpa" in IMPLS:
        try:
            sets = make_sets(B, T, 3)
            fq = time_fwd(sdpa, sets, args.warmup, args.iters)
            (f2, t2) = time_fwdbwd(sdpa, sets, args.warmup, args.iters)
            r = {"impl": "sdpa_flash", "T": T, "B": B, "fwd_ms": fq[0], "fwd_p10_ms": fq[1], "fwd_p90_ms": fq[2],
                 "fwd_in_fwdbwd_ms": f2[0], "fwdbwd_ms": t2[0], "fwdbwd_p10_ms": t2[1], "fwdbwd_p90_ms": t2[2],
                 "tflops_fwdbwd": sdpa_flop(B, T) * 3.5 / (t2[0] * 1e-3) / 1e12, "valid": True}
            print(f"  sdpa_flash   T={T:<5} B={B:<2}  fwd {fq[0]:8.3f} ms  fwd+bwd {t2[0]:8.3f} ms "
                  f"(p10 {t2[1]:.3f}, p90 {t2[2]:.3f})  {r['tflops_fwdbwd']:6.1f} TFLOP/s", flush=True)
        except Exception as e:  # noqa: BLE001 - record and go on
            r = {"impl": "sdpa_flash", "T": T, "B": B, "valid": False, "error": repr(e)}
            print(f"  sdpa_flash   T={T:<5} B={B:<2}  FAILED: {e!r}", flush=True)
        out["results"].append(r)
        del sets
        torch.cuda.empty_cache()
    # ---- plain PyTorch LSSAR
    if "plain" not in IMPLS:
        continue
    r = {"impl": "plain_lssar", "T": T, "B": B}
    free, total = torch.cuda.mem_get_info()
    if T > 4096:
        known = [t for t in peak_plain if t <= 4096]
        if not known:
            r.update(valid=False, skipped="no smaller T measured to predict the memory from")
        else:
            t0 = max(known)
            pred = peak_plain[t0] * (T * T * B) / (t0 * t0 * max(1, args.tokens // t0))
            r["predicted_peak_gib"] = pred / 2**30
            if pred > 0.92 * free:
                r.update(valid=False, skipped=f"would not fit: predicted peak {pred / 2**30:.0f} GiB "
                                               f"(T={t0} measured {peak_plain[t0] / 2**30:.1f} GiB, x T^2 B) "
                                               f"> 92% of the {free / 2**30:.0f} GiB free")
    if "skipped" not in r:
        try:
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            sets = make_sets(B, T, 2)
            it = max(3, args.iters // 3)
            (f2, t2) = time_fwdbwd(lssar_plain, sets, 1, it)
            peak = torch.cuda.max_memory_allocated() - base
            peak_plain[T] = peak
            r.update(valid=True, fwd_ms=f2[0], fwdbwd_ms=t2[0], fwdbwd_p10_ms=t2[1], fwdbwd_p90_ms=t2[2],
                     peak_gib=peak / 2**30, iters=it)
            print(f"  plain_lssar  T={T:<5} B={B:<2}  fwd {f2[0]:8.3f} ms  fwd+bwd {t2[0]:8.3f} ms "
                  f"(p10 {t2[1]:.3f}, p90 {t2[2]:.3f})  peak {peak / 2**30:.1f} GiB", flush=True)
        except torch.cuda.OutOfMemoryError as e:
            r.update(valid=False, skipped=f"out of memory: {str(e).splitlines()[0]}")
        except Exception as e:  # noqa: BLE001
            r.update(valid=False, error=repr(e))
        sets = None
        torch.cuda.empty_cache()
    if "skipped" in r:
        print(f"  plain_lssar  T={T:<5} B={B:<2}  skipped: {r['skipped']}", flush=True)
    elif not r.get("valid"):
        print(f"  plain_lssar  T={T:<5} B={B:<2}  FAILED: {r.get('error')}", flush=True)
    out["results"].append(r)


# ---- cross-check of liblssar's kernels against PyTorch (optional)
def crosscheck(lib_path):
    import ctypes

    class Desc(ctypes.Structure):
        # lssar_attn_desc of include/lssar.h, every field in order
        _fields_ = [("kind", ctypes.c_int), ("p", ctypes.c_float), ("ssmax_s", ctypes.c_void_p),
                    ("len_norm", ctypes.c_int), ("train_len", ctypes.c_int), ("temp_d", ctypes.c_int)]
    try:
        lib = ctypes.CDLL(lib_path)
    except OSError as e:
        return {"skipped": f"cannot load {lib_path}: {e}"}
    vp, ci = ctypes.c_void_p, ctypes.c_int
    lib.lssar_attn_cuda_workspace_size.restype = ctypes.c_size_t
    lib.lssar_attn_cuda_workspace_size.argtypes = [ctypes.POINTER(Desc), ci, ci, ci, ci, ci]
    lib.lssar_attn_forward_cuda.argtypes = [ctypes.POINTER(Desc), ci, ci, ci, ci, ci, vp, vp, vp, vp, vp, vp]
    lib.lssar_attn_backward_cuda.argtypes = [ctypes.POINTER(Desc), ci, ci, ci, ci, ci, vp, vp, vp, vp, vp, vp, vp, vp,
                                             vp, vp, vp]
    lib.lssar_errmsg.restype = ctypes.c_char_p
    res = {}
    B, T = 2, 1024
    (q, k, v, dy), = make_sets(B, T, 1)
    stream = torch.cuda.current_stream().cuda_stream
    for kind, name, ref_fn, other in ((3, "lssar", lssar_plain, None), (0, "softmax", softmax_plain, sdpa)):
        d = Desc(kind, P, None)
        ws = torch.empty(lib.lssar_attn_cuda_workspace_size(ctypes.byref(d), 1, B, T, H, D), dtype=torch.uint8, device=dev)
        qb, kb, vb, dyb = (t.detach().contiguous() for t in (q, k, v, dy))
        y, dq, dk, dv = (torch.full_like(qb, float("nan")) for _ in range(4))
        rc = lib.lssar_attn_forward_cuda(ctypes.byref(d), 1, B, T, H, D, qb.data_ptr(), kb.data_ptr(), vb.data_ptr(),
                                         y.data_ptr(), ws.data_ptr(), stream)
        if rc == 0:
            rc = lib.lssar_attn_backward_cuda(ctypes.byref(d), 1, B, T, H, D, qb.data_ptr(), kb.data_ptr(), vb.data_ptr(),
                                              y.data_ptr(), dyb.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(),
                                              None, ws.data_ptr(), stream)
        torch.cuda.synchronize()
        if rc:
            res[name] = {"error": f"rc {rc}: {lib.lssar_errmsg().decode(errors='replace')}"}
            continue
        # the float32 PyTorch reference on the same bf16 inputs (autograd for the gradients)
        qr, kr, vr = (t.detach().float().requires_grad_(True) for t in (q, k, v))
        yr = (lssar_plain(qr, kr, vr) if kind == 3 else softmax_plain(qr, kr, vr)).float()
        yr.backward(dy.float())
        rel = lambda a, b: float((a.float() - b).norm() / b.norm())  # noqa: E731
        entry = {"ours_vs_fp32_torch": {"out": rel(y, yr), "dq": rel(dq, qr.grad), "dk": rel(dk, kr.grad),
                                        "dv": rel(dv, vr.grad)}}
        if other is not None:
            qo, ko, vo = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
            yo = other(qo, ko, vo)
            yo.backward(dy)
            entry["sdpa_vs_fp32_torch"] = {"out": rel(yo, yr), "dq": rel(qo.grad, qr.grad), "dk": rel(ko.grad, kr.grad),
                                           "dv": rel(vo.grad, vr.grad)}
        entry["agree"] = all(x < 2e-2 for x in entry["ours_vs_fp32_torch"].values())
        res[name] = entry
        print(f"  cross-check {name} B={B} T={T}: ours vs fp32 torch " +
              ", ".join(f"{a} {b:.2g}" for a, b in entry["ours_vs_fp32_torch"].items()) +
              ("" if other is None else "; sdpa vs fp32 torch " +
               ", ".join(f"{a} {b:.2g}" for a, b in entry["sdpa_vs_fp32_torch"].items())) +
              ("" if entry["agree"] else "  DISAGREE (> 2e-2)"), flush=True)
    return res


if args.lib:
    try:
        out["crosscheck"] = crosscheck(args.lib)
    except Exception as e:  # noqa: BLE001
        out["crosscheck"] = {"error": repr(e)}
        print(f"  cross-check failed: {e!r}", flush=True)

write(args.json, out)
print("\n%-12s %6s %3s %10s %10s" % ("impl", "T", "B", "fwd ms", "total ms"))
for r in out["results"]:
    if r.get("valid"):
        print("%-12s %6d %3d %10.3f %10.3f" % (r["impl"], r["T"], r["B"], r.get("fwd_ms", float("nan")), r["fwdbwd_ms"]))
    else:
        print("%-12s %6d %3d %10s %10s  (%s)" % (r["impl"], r["T"], r["B"], "-", "-", r.get("skipped") or r.get("error")))
