"""attn_torch.py - causal attention written plainly in PyTorch, the T x T matrices materialised
(as public reimplementations do), for the GPU benchmarks: scripts/gpu_attn_torch.py (the kernels
against them) and scripts/gpt2_torch_bench.py (a whole GPT-2 training step with them). Layout
(B, T, H, D), as lssar's; straight from ../shared/spec/attention.md (docs/attention.md).
tests/torch_ref.py is the float64 reference of every kind; these are the fast-as-written versions.
"""
import math

import torch
import torch.nn.functional as F


def lssar_plain(q, k, v, p=15.0):
    """LSSAR from spec/attention.md, the T x T matrices materialised, fp32 inside (u, Z and the
    weights must be fp32: p = 15 amplifies the relative error of u fifteen-fold)."""
    B, T, Hh, Dd = q.shape
    qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))                 # (B, H, T, D)
    qh = qf / qf.norm(dim=-1, keepdim=True).clamp_min(1e-12)                  # l2-normalised
    kh = kf / kf.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    n = torch.arange(1, T + 1, device=q.device, dtype=torch.float32)          # n_i = i + 1
    lam = math.log(Dd) * torch.log(n)                                          # ln(D) ln(n_i)
    x = lam[:, None] * (qh @ kh.transpose(-1, -2))                             # (B, H, T, T)
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    a = torch.where(mask, F.softplus(x), 0.0)                                  # softplus, causal
    alpha = a / a.sum(-1, keepdim=True)                                        # l1-normalised
    o = (torch.arange(T, device=q.device) >= 3).float()                        # 0 for the first 3 rows
    u = torch.where(mask, n[:, None] * alpha - o[:, None], -1.0)              # u = n alpha - o
    umax = u.amax(-1, keepdim=True).detach()                                   # beta does not depend on it
    umax = torch.where(umax > 0, umax, torch.ones_like(umax))
    b = torch.relu(u / umax) ** p                                              # (u / u_max)^p in [0, 1]
    W = b.sum(-1, keepdim=True)
    beta = torch.where(W > 0, b / W.clamp_min(1e-38), alpha)                   # uniform row: beta = alpha
    return (beta @ vf).transpose(1, 2).to(q.dtype)


def softmax_plain(q, k, v):
    B, T, Hh, Dd = q.shape
    qf, kf, vf = (t.float().transpose(1, 2) for t in (q, k, v))
    s = (qf @ kf.transpose(-1, -2)) / math.sqrt(Dd)
    s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool, device=q.device).tril(), float("-inf"))
    return (torch.softmax(s, -1) @ vf).transpose(1, 2)
