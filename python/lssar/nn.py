"""nn.py - causal self-attention as a torch.nn.Module, with lssar's kernels inside."""

import torch

from . import _lib
from .functional import attention

def _rope(x, base):
    """x (B, H, T, D): rotate pairs (c, c + D/2) by t * base^(-2c/D), as lssar's models (GPT-NeoX)."""
    B, H, T, D = x.shape
    h = D // 2
    c = torch.arange(h, dtype=torch.float32, device=x.device)
    ang = torch.arange(T, dtype=torch.float32, device=x.device)[:, None] * base ** (-2.0 * c / D)   # (T, h)
    cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)

class CausalSelfAttention(torch.nn.Module):
    """x (B, T, dim) -> (B, T, dim): c_attn (dim -> 3 dim: q, k, v), optional RoPE on q and k,
    lssar.attention over `heads` heads, then c_proj (dim -> dim). The parameter names and the
    initialisation (normal(0, 0.02), zero biases, SSMax scales 0.43) are those of lssar's GPT
    blocks, so an lssar checkpoint's attn.* tensors load into it.

    kind, p, len_norm, train_len, temp_d: as lssar.attention. rope_base: None for no positions in
    the attention (learned or no positions), else the RoPE base (10000 as lssar's models)."""

    def __init__(self, dim, heads, kind="lssar", p=15.0, rope_base=10000.0, len_norm="train", train_len=None,
                 temp_d=0, bias=True):
        super().__init__()
        if dim % heads:
            raise ValueError("CausalSelfAttention: heads (%d) must divide dim (%d)" % (heads, dim))
        self.dim, self.heads = dim, heads
        self.kind, self.p, self.rope_base = kind, p, rope_base
        self.len_norm, self.train_len, self.temp_d = len_norm, train_len, temp_d
        self.c_attn = torch.nn.Linear(dim, 3 * dim, bias=bias)
        self.c_proj = torch.nn.Linear(dim, dim, bias=bias)
        for lin in (self.c_attn, self.c_proj):
            torch.nn.init.normal_(lin.weight, std=0.02)
            if bias:
                torch.nn.init.zeros_(lin.bias)
        self.ssmax_s = torch.nn.Parameter(torch.full((heads,), 0.43)) \
            if _lib.stages(kind).score == _lib.SCORE_SSMAX else None

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))   # (B, H, T, D)
        if self.rope_base is not None:
            q, k = _rope(q, self.rope_base), _rope(k, self.rope_base)
        y = attention(q, k, v, kind=self.kind, p=self.p, ssmax_s=self.ssmax_s, len_norm=self.len_norm,
                      train_len=self.train_len, temp_d=self.temp_d)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, C))

    def extra_repr(self):
        return "dim=%d, heads=%d, kind=%s, p=%g, rope_base=%s" % (self.dim, self.heads, self.kind, self.p, self.rope_base)
