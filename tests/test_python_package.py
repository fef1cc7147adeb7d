#!/usr/bin/env python3
"""test_python_package.py - the PyTorch package (python/lssar) from its one install command,
`make python`, then in the virtual environment it installed into:
  - ctypes' lssar_attn_desc has every offset of include/lssar.h's (a compiled probe says);
  - lssar.attention, forward and gradients (q, k, v and SSMax's scales), for every kind (sigmoid /
    relu with both length normalisations, lssa / lssar with another temperature D), against the
    float64 PyTorch reference tests/torch_ref.py: relative error under the spec's 1e-4 (whole
    tensors; dq and dk with the floors of tests/attn_ref.h); a negative control (lssar against
    the lssa reference) must fail that bound;
  - CausalSelfAttention against its own float64 composition, and its backward;
  - wrong shapes, dtypes, kinds and arguments raise ValueError / TypeError / lssar.Error with the
    library's message;
  - CUDA tensors against the CPU when a CUDA build sees a GPU (else one skip line).
Skips (0 passed, 0 failed) in a sanitizer build: Python cannot load an ASan-built liblssar.so.
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", "build")
VENV = os.environ.get("LSSAR_VENV", os.path.join(ROOT, ".venv"))
passed = failed = 0


def check(cond, name, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok - " + name)
    else:
        failed += 1
        print("not ok - %s %s" % (name, detail))


def finish():
    print("test_python_package: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


def outer():
    flags = open(os.path.join(ROOT, BUILD, "build-flags")).read() if os.path.exists(os.path.join(ROOT, BUILD, "build-flags")) else ""
    if "-fsanitize=" in flags:
        print("skip - a sanitizer build's liblssar.so does not load into Python")
        finish()
    r = subprocess.run(["make", "-s", "--no-print-directory", "BUILD=" + BUILD, "python"], cwd=ROOT,
                       capture_output=True, text=True)
    check(r.returncode == 0, "make python (the install command)", (r.stdout + r.stderr)[-2000:])
    if r.returncode:
        finish()
    r = subprocess.run([os.path.join(VENV, "bin", "python"), os.path.abspath(__file__), "--inner"], cwd=tempfile.gettempdir(),
                       capture_output=True, text=True)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr[-3000:])
    global passed, failed
    for line in r.stdout.splitlines():
        if line.startswith("inner: "):
            p, f = line[7:].split(",")
            passed += int(p)
            failed += int(f)
            break
    else:
        check(False, "the checks in the virtual environment ran to their end", "exit %d" % r.returncode)
    finish()


# ------------------------------------------------------------------ in the virtual environment

def rel(got, ref, floor=0.0):
    import torch
    den = max(float(ref.norm()), floor)
    num = float((got.double() - ref).norm())
    return num / den if den > 0 else num


def layout_probe(lssar):
    import ctypes
    src = r'''
#include <stddef.h>
#include <stdio.h>
#include "lssar.h"
int main(void) {
    printf("%zu %zu %zu %zu %zu %zu %zu\n", sizeof(lssar_attn_desc), offsetof(lssar_attn_desc, kind),
           offsetof(lssar_attn_desc, p), offsetof(lssar_attn_desc, ssmax_s), offsetof(lssar_attn_desc, len_norm),
           offsetof(lssar_attn_desc, train_len), offsetof(lssar_attn_desc, temp_d));
    return 0;
}
'''
    d = tempfile.mkdtemp()
    with open(os.path.join(d, "probe.c"), "w") as f:
        f.write(src)
    r = subprocess.run(["cc", "-I" + os.path.join(ROOT, "include"), os.path.join(d, "probe.c"), "-o", os.path.join(d, "probe")],
                       capture_output=True, text=True)
    if r.returncode:
        check(False, "the lssar_attn_desc probe compiles", r.stderr)
        return
    got = subprocess.run([os.path.join(d, "probe")], capture_output=True, text=True).stdout.split()
    D = lssar._lib.AttnDesc
    want = [ctypes.sizeof(D)] + [getattr(D, n).offset for n in ("kind", "p", "ssmax_s", "len_norm", "train_len", "temp_d")]
    check([int(x) for x in got] == want, "ctypes lssar_attn_desc matches include/lssar.h (size and offsets)",
          "C %s, ctypes %s" % (got, want))


def inner():
    import torch
    import lssar
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import torch_ref

    check(lssar.library.startswith(VENV) or "site-packages" in lssar.library,
          "the installed package carries its library (%s)" % lssar.library)
    layout_probe(lssar)

    g = torch.Generator().manual_seed(5)
    B, H, T, D = 2, 2, 37, 16
    cases = [("softmax", "train", 0), ("ssmax", "train", 0), ("lssa", "train", 0), ("lssar", "train", 0),
             ("lssa", "train", 64), ("lssar", "train", 64), ("sigmoid", "train", 0), ("sigmoid", "row", 0),
             ("relu", "train", 0), ("relu", "row", 0)]
    cases += [(kd, "train", 0) for kd in torch_ref.KINDS[6:]]   # the other combinations of stages
    L = 24   # sigmoid / relu training length: below T, so rows past it are covered
    for kind, ln, td in cases:
        q, k, v, dy = (torch.randn(B, H, T, D, generator=g) for _ in range(4))
        s = torch.tensor([0.43, 0.63]) if kind not in ("sigmoid", "relu") and torch_ref.stages(kind)[0] == "ssmax" \
            else None
        leaves = [t.clone().requires_grad_() for t in (q, k, v)] + ([s.clone().requires_grad_()] if s is not None else [])
        y = lssar.attention(*leaves[:3], kind=kind, p=15.0, ssmax_s=leaves[3] if s is not None else None, len_norm=ln,
                            train_len=L, temp_d=td)
        (y * dy).sum().backward()
        # the float64 reference, in its (B, T, H, D) layout
        ref = [t.double().transpose(1, 2).contiguous().requires_grad_() for t in (q, k, v)]
        sd = s.double().requires_grad_() if s is not None else None
        yr = torch_ref.attention(*ref, kind, p=15.0, s=sd, L=L, len_norm=ln, temp_d=td).transpose(1, 2)
        (yr * dy.double()).sum().backward()
        rq, rk = float(ref[0].norm()), float(ref[1].norm())
        gq, gk = ref[0].grad.transpose(1, 2), ref[1].grad.transpose(1, 2)
        e = {"out": rel(y.detach(), yr.detach()),
             "dq": rel(leaves[0].grad, gq, 1e-2 * float(gk.norm()) * rk / rq),
             "dk": rel(leaves[1].grad, gk, 1e-2 * float(gq.norm()) * rq / rk),
             "dv": rel(leaves[2].grad, ref[2].grad.transpose(1, 2))}
        if s is not None:
            e["ds"] = rel(leaves[3].grad, sd.grad)
        name = "%s%s%s" % (kind, " len_norm " + ln if kind in ("sigmoid", "relu") else "", " temp_d %d" % td if td else "")
        check(max(e.values()) < 1e-4, "attention %s: forward and gradients within 1e-4 of float64 (%s)"
              % (name, ", ".join("%s %.1e" % kv for kv in e.items())))
    # negative control: the lssar op against the lssa reference
    q, k, v = (torch.randn(B, H, T, D, generator=g) for _ in range(3))
    y = lssar.attention(q, k, v, kind="lssar")
    yr = torch_ref.attention(*(t.double().transpose(1, 2) for t in (q, k, v)), "lssa").transpose(1, 2)
    check(rel(y, yr) > 1e-2, "negative control: lssar is not within the bound of the lssa reference (%.1e)" % rel(y, yr))

    # the module against its float64 composition
    torch.manual_seed(3)
    for kind in ("lssar", "ssmax"):
        m = lssar.CausalSelfAttention(32, 2, kind=kind)
        x = torch.randn(2, 20, 32)
        out = m(x)
        out.square().sum().backward()
        grads_ok = all(p.grad is not None and torch.isfinite(p.grad).all() for p in m.parameters())
        md = {n: p.detach().double() for n, p in m.named_parameters()}
        qkv = x.double() @ md["c_attn.weight"].T + md["c_attn.bias"]
        qd, kd, vd = (t.view(2, 20, 2, 16) for t in qkv.split(32, dim=2))
        qd, kd = torch_ref.rope(qd), torch_ref.rope(kd)
        yd = torch_ref.attention(qd, kd, vd, kind, s=md.get("ssmax_s"))
        ref = yd.reshape(2, 20, 32) @ md["c_proj.weight"].T + md["c_proj.bias"]
        check(rel(out.detach(), ref) < 1e-4 and grads_ok, "CausalSelfAttention(%s) matches float64 (%.1e), every parameter "
              "gets a finite gradient" % (kind, rel(out.detach(), ref)))

    # errors with the library's message
    q = torch.randn(1, 2, 8, 16)
    def raises(exc, needle, fn, name):
        try:
            fn()
        except exc as err:
            check(needle in str(err), name, "message: %s" % err)
            return
        except Exception as err:   # noqa: BLE001 - the wrong exception is the failure reported
            check(False, name, "raised %s: %s" % (type(err).__name__, err))
            return
        check(False, name, "nothing raised")
    raises(lssar.Error, "use softmax", lambda: lssar.attention(q, q, q, kind="flash"), "unknown kind: lssar.Error with the library's message")
    raises(ValueError, "(B, H, T, D)", lambda: lssar.attention(q[0], q[0], q[0]), "3-D input: ValueError")
    raises(TypeError, "float32", lambda: lssar.attention(q.double(), q.double(), q.double()), "float64 on the CPU: TypeError")
    raises(ValueError, "one shape", lambda: lssar.attention(q, q[:, :, :4], q[:, :, :4]), "q, k, v of different lengths: ValueError")
    raises(ValueError, "ssmax_s", lambda: lssar.attention(q, q, q, kind="ssmax"), "ssmax without its scales: ValueError")
    raises(lssar.Error, "len_norm", lambda: lssar.attention(q, q, q, kind="relu", len_norm="col"), "unknown len_norm: lssar.Error")
    raises(lssar.Error, "lssar_attn_forward", lambda: lssar.attention(q, q, q, kind="lssar", p=-1.0),
           "p <= 0: the library refuses it (lssar.Error)")

    # CUDA against the CPU
    if torch.cuda.is_available() and lssar.cuda_available():
        q, k, v = (torch.randn(2, 2, 70, 64, generator=g) for _ in range(3))
        for kind in ("softmax", "lssar"):
            yc = lssar.attention(q, k, v, kind=kind)
            yg = lssar.attention(q.cuda(), k.cuda(), v.cuda(), kind=kind).cpu()
            check(rel(yg, yc.double()) < 1e-4, "CUDA float32 %s matches the CPU (%.1e)" % (kind, rel(yg, yc.double())))
    else:
        print("skip - CUDA: no GPU here, or a liblssar built without CUDA (only the CPU path ran)")
    print("inner: %d,%d" % (passed, failed))


if __name__ == "__main__":
    if "--inner" in sys.argv:
        try:
            inner()
        except Exception as err:   # noqa: BLE001 - reported as a failure by the outer run
            import traceback
            traceback.print_exc()
            print("inner: %d,%d" % (passed, failed + 1))
    else:
        outer()
