#!/usr/bin/env python3
"""flex_attn_torch.py - LSSA and LSSAR written with PyTorch FlexAttention
(torch.nn.attention.flex_attention, PyTorch 2.5 and later): what a PyTorch user would pick instead
of lssar's kernels, the peer the fused CUDA kernels must beat (issue 35). Straight from
docs/attention.md; layout (B, H, T, D) as FlexAttention and SDPA take it; causal.

  LSSA:  one flex_attention call on the l2-normalised q and k with scale 1, so that the score is
         the cosine c_ij; score_mod returns ln softplus(ln(D) ln(n_i) c_ij), and FlexAttention's
         softmax of that is softplus / sum_j softplus: alpha, the l1 normalisation. The call's
         log-sum-exp is lse_i = ln Z_i, Z_i = sum_j softplus(x_ij).
  LSSAR: a second call on the same inputs whose score_mod uses the first call's lse:
         u_ij = n_i exp(ln a_ij - lse_i) - o_i (= n_i alpha_ij - o_i; o_i = 0 for the first three
         rows, 1 after), score p ln u_ij, or -inf where u_ij <= 0; its softmax is
         u^p / sum_j u^p = beta. The softmax subtracts the row's largest score, which is the
         spec's (u / u_max)^p: no overflow at any length, in float32 or bfloat16 storage.
  The causal mask is a BlockMask (only diagonal blocks are masked element by element).

What FlexAttention does not express, and how it is handled here:
  - The fallback row (i >= 3 and every u_ij <= 0: the LSSA row is exactly uniform, and the spec
    takes beta = alpha): every score of the second call is -inf, and FlexAttention returns 0 with
    lse -inf for such a row. The row is taken from the first call's output (alpha v) by a
    torch.where outside FlexAttention, on the second call's lse. That is exact; it needs the
    first call's output, which LSSAR computes anyway for its lse.
  - Everything else, the first three rows' offset o_i = 0 included, is inside score_mod
    (q_idx is known there).
  - The gradient reaches q and k through both calls: through the second call's scores and
    through lse_i, a tensor score_mod captures (FlexAttention differentiates captured tensors)
    and that the first call returns with its own gradient.
  - On the CPU, PyTorch 2.13 runs FlexAttention forward only: its public API refuses backward
    on the CPU ("FlexAttention does not support backward on CPU"), and compiled on the CPU it
    supports inference only, without the log-sum-exp ("torch.compile on CPU only supports
    inference and `return_lse` is not supported yet"), so compiled LSSAR cannot run on the CPU
    at all; compiled LSSA can (forward). Eager (the unfused, T x T implementation) runs both
    kinds forward. tests/test_flex_attention.py checks the forward against the float64
    reference, and the gradients of this formulation with the eager implementation's backward
    (lifting the API's device check, which only the test does); the CUDA kernels' gradients are
    checked on a GPU by scripts/gpu_attn_torch.py (scripts/gpu-check.sh).

    .venv-torch2/bin/python scripts/flex_attn_torch.py [--T 64,256] [--D 64] [--p 15] [--compile]

prints, on the CPU, each kind's relative error against tests/torch_ref.py (float64).
"""
import math

import torch

try:
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
except ImportError as e:   # FlexAttention: PyTorch 2.5 and later
    flex_attention = None
    IMPORT_ERROR = "torch %s has no FlexAttention (%s)" % (torch.__version__, e)
else:
    IMPORT_ERROR = None
try:
    from torch.nn.attention.flex_attention import AuxRequest   # 2.9 and later; return_lse before
except ImportError:
    AuxRequest = None


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def causal_mask(T, device):
    """The causal BlockMask for T queries and keys (build it once per T and pass it to lssa / lssar)."""
    return create_block_mask(_causal, None, None, T, T, device=device)


def _normalise(x):
    """x / max(|x|, 1e-12) over the last axis, computed in float32 at least: bf16 inputs are rounded
    once, after the division (as lssar's kernels take bf16 operands and compute in float32)."""
    w = x.to(torch.promote_types(x.dtype, torch.float32))
    return (w / w.norm(dim=-1, keepdim=True).clamp_min(1e-12)).to(x.dtype)


def _log_softplus(score, q_idx, ln_d):
    """ln softplus(ln(D) ln(n_i) c) for the cosine c = score of row q_idx (n_i = q_idx + 1)."""
    x = ln_d * torch.log((q_idx + 1).to(score.dtype)) * score
    return torch.log(torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs())))


def _call(flex, q, k, v, score_mod, block_mask):
    """One causal FlexAttention call with scale 1 -> (out, lse)."""
    if AuxRequest is not None:
        y, aux = flex(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=1.0, return_aux=AuxRequest(lse=True))
        return y, aux.lse
    return flex(q, k, v, score_mod=score_mod, block_mask=block_mask, scale=1.0, return_lse=True)


def lssa(q, k, v, block_mask=None, temp_d=0, flex=None, return_lse=False):
    """LSSA of q, k, v (B, H, T, D), causal: one FlexAttention call. temp_d: the D of the ln(D) ln(n)
    temperature (0: the head size). flex: flex_attention or a compiled one. return_lse: also
    ln Z_i (B, H, T), float32 (compiled on the CPU, PyTorch has no lse: leave it False there)."""
    flex = flex or flex_attention
    ln_d = math.log(temp_d or q.shape[-1])
    if block_mask is None:
        block_mask = causal_mask(q.shape[2], q.device)

    def score_mod(score, b, h, q_idx, kv_idx):
        return _log_softplus(score, q_idx, ln_d)
    if return_lse:
        return _call(flex, _normalise(q), _normalise(k), v, score_mod, block_mask)
    return flex(_normalise(q), _normalise(k), v, score_mod=score_mod, block_mask=block_mask, scale=1.0)


def lssar(q, k, v, p=15.0, block_mask=None, temp_d=0, flex=None, return_fallback=False):
    """LSSAR of q, k, v (B, H, T, D), causal: LSSA's call for its lse, then the re-weighting's call.
    return_fallback: also the (B, H, T) mask of the fallback rows (exactly uniform LSSA rows,
    where beta = alpha)."""
    flex = flex or flex_attention
    ln_d = math.log(temp_d or q.shape[-1])
    if block_mask is None:
        block_mask = causal_mask(q.shape[2], q.device)
    qn, kn = _normalise(q), _normalise(k)

    def score_mod1(score, b, h, q_idx, kv_idx):
        return _log_softplus(score, q_idx, ln_d)
    y1, lse = _call(flex, qn, kn, v, score_mod1, block_mask)

    def score_mod2(score, b, h, q_idx, kv_idx):
        n = (q_idx + 1).to(score.dtype)
        o = (q_idx >= 3).to(score.dtype)                         # the first three rows are not inhibited
        u = n * torch.exp(_log_softplus(score, q_idx, ln_d) - lse[b, h, q_idx]) - o
        pos = u > 0
        # log of 1 where u <= 0: no NaN in the branch torch.where drops, nor in its gradient
        return torch.where(pos, p * torch.log(torch.where(pos, u, torch.ones_like(u))), -float("inf"))
    y2, lse2 = _call(flex, qn, kn, v, score_mod2, block_mask)
    fallback = torch.isneginf(lse2)                               # every u <= 0: beta = alpha
    y = torch.where(fallback[..., None], y1, y2)
    return (y, fallback) if return_fallback else y


def main():
    import argparse
    import os
    import sys
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", default="64,256")
    ap.add_argument("--D", type=int, default=64)
    ap.add_argument("--H", type=int, default=2)
    ap.add_argument("--p", type=float, default=15.0)
    ap.add_argument("--compile", action="store_true", help="also LSSA through torch.compile(flex_attention) (CPU: forward)")
    a = ap.parse_args()
    if IMPORT_ERROR:
        sys.exit("flex_attn_torch: " + IMPORT_ERROR)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
    import torch_ref
    tr = lambda t: t.transpose(1, 2)   # noqa: E731 - torch_ref's layout is (B, T, H, D)
    for T in (int(x) for x in a.T.split(",")):
        g = torch.Generator().manual_seed(T)
        q, k, v = (torch.randn(1, a.H, T, a.D, generator=g) for _ in range(3))
        ref = {kd: tr(torch_ref.attention(*(tr(t.double()) for t in (q, k, v)), kd, p=a.p)) for kd in ("lssa", "lssar")}
        got = {"lssa": lssa(q, k, v), "lssar": lssar(q, k, v, p=a.p)}
        if a.compile:
            got["lssa compiled"] = lssa(q, k, v, flex=torch.compile(flex_attention))
        for name, y in got.items():
            r = ref[name.split()[0]]
            print("T=%-5d %-14s rel. error %.2e" % (T, name, float((y.double() - r).norm() / r.norm())))


if __name__ == "__main__":
    main()
