#!/usr/bin/env python3
"""torch_attention.py - the package's op (lssar.attention: liblssar's C kernels) against plain PyTorch
attention of the same kind (tests/torch_ref.py's formula in float32, T x T matrices, autograd),
forward + backward on the CPU, in the same run; prints the median time of each and the ratio, and
writes JSON. Run it in the environment `make python` installed into:

    .venv/bin/python bench/torch_attention.py [--kinds softmax,lssar] [--T 256,1024] [--reps 5] [--json OUT]

Both sides use the threads torch and OpenMP are given (OMP_NUM_THREADS); a shared machine is noisy.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

import lssar

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import torch_ref  # noqa: E402


def fwdbwd(fn, q, k, v, dy):
    for t in (q, k, v):
        t.grad = None
    y = fn(q, k, v)
    (y * dy).sum().backward()


def timed(fn, q, k, v, dy, reps):
    fwdbwd(fn, q, k, v, dy)   # warm-up
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fwdbwd(fn, q, k, v, dy)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kinds", default="softmax,lssar")
    ap.add_argument("--T", default="256,1024")
    ap.add_argument("--B", type=int, default=1)
    ap.add_argument("--H", type=int, default=4)
    ap.add_argument("--D", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default=os.path.join(os.environ.get("BUILD", "build"), "bench", "torch_attention.json"))
    a = ap.parse_args()
    rows = []
    print("%-8s %6s %12s %12s %8s" % ("kind", "T", "lssar (s)", "torch (s)", "torch/lssar"))
    for kind in a.kinds.split(","):
        for T in (int(x) for x in a.T.split(",")):
            g = torch.Generator().manual_seed(T)
            q, k, v, dy = (torch.randn(a.B, a.H, T, a.D, generator=g) for _ in range(4))
            q, k, v = (t.requires_grad_() for t in (q, k, v))
            ours = lambda q, k, v: lssar.attention(q, k, v, kind=kind)   # noqa: E731
            plain = lambda q, k, v: torch_ref.attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),   # noqa: E731
                                                        kind, L=T).transpose(1, 2)
            t1, t2 = timed(ours, q, k, v, dy, a.reps), timed(plain, q, k, v, dy, a.reps)
            rows.append({"kind": kind, "T": T, "B": a.B, "H": a.H, "D": a.D, "lssar_s": t1, "torch_s": t2, "ratio": t2 / t1})
            print("%-8s %6d %12.4f %12.4f %8.2f" % (kind, T, t1, t2, t2 / t1))
    os.makedirs(os.path.dirname(a.json) or ".", exist_ok=True)
    with open(a.json, "w") as f:
        json.dump({"torch": torch.__version__, "threads": torch.get_num_threads(), "library": lssar.library, "rows": rows}, f, indent=1)
    print("json: %s" % a.json)


if __name__ == "__main__":
    main()
