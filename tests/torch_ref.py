"""torch_ref.py - a plain PyTorch reference of lssar's GPT model (src/model/gpt.h), written out so
that every step can be read against docs/attention.md: pre-LayerNorm blocks, GELU(tanh) MLP 4x,
RoPE (rotate half) / learned / no positions, C token channels (embeddings summed, one output head
per channel, tied or untied), and every attention kind (the stages of docs/attention.md). Parameters are a dict of tensors named
as in gpt.h (PyTorch GPT-2 names), so a model.safetensors from lssar loads directly.

Debian's python3-torch 1.13 has no scaled_dot_product_attention; attention is written out with a
T x T matrix, which is fine for the small shapes of the tests. Run in float64 for references.
"""
import math

import torch
import torch.nn.functional as F

IGNORE = 0xFFFF
KINDS = ("softmax", "ssmax", "lssa", "lssar", "sigmoid", "relu", "softmax+rw", "ssmax+rw", "softmax+cos",
         "softmax+cos+rw", "lssa+dot", "lssar+dot", "lssa+ssmax", "lssar+ssmax")


def rope(x, theta=10000.0):
    """x (B, T, H, D) -> rotated; pairs (c, c + D/2), angle t * theta^(-2c/D)."""
    B, T, H, D = x.shape
    h = D // 2
    c = torch.arange(h, dtype=torch.float64)
    t = torch.arange(T, dtype=torch.float64)
    ang = t[:, None] * theta ** (-2.0 * c / D)               # (T, h)
    cos = torch.cos(ang).to(x.dtype)[None, :, None, :]
    sin = torch.sin(ang).to(x.dtype)[None, :, None, :]
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def softplus(x):
    return torch.clamp(x, min=0) + torch.log1p(torch.exp(-x.abs()))


# The presets as stages (score, phi, re-weighting); sigmoid and relu are their own (len) rows.
PRESETS = {"softmax": ("dot", "exp", False), "ssmax": ("ssmax", "exp", False), "lssa": ("cos", "softplus", False),
           "lssar": ("cos", "softplus", True)}
MODS = {"dot": (0, "dot"), "ssmax": (0, "ssmax"), "cos": (0, "cos"), "exp": (1, "exp"), "softplus": (1, "softplus"),
        "rw": (2, True), "norw": (2, False)}


def stages(kind):
    """A kind name -> (score, phi, reweight), read as docs/attention.md "Stages" spells it: a preset,
    then +stage replacing that stage."""
    base, *mods = kind.split("+")
    st = list(PRESETS[base])
    for m in mods:
        i, val = MODS[m]
        st[i] = val
    return tuple(st)


def attention(q, k, v, kind, p=15.0, s=None, L=None, len_norm="train", temp_d=0):
    """q, k, v (B, T, H, D) -> y (B, T, H, D), causal, per docs/attention.md (any kind, by its
    stages). L, len_norm: sigmoid and relu (the training length; "train" or "row"). temp_d: the cos
    score's D of ln(D) ln(n) (0: the head size)."""
    B, T, H, D = q.shape
    q, k, v = (z.transpose(1, 2) for z in (q, k, v))          # (B, H, T, D)
    n = torch.arange(1, T + 1, dtype=q.dtype)[:, None]        # (T, 1) visible keys per row
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    if kind in ("sigmoid", "relu"):                           # no row normalisation
        Lr = n if len_norm == "row" else torch.full_like(n, float(L))
        x = q @ k.transpose(-1, -2) / math.sqrt(D)
        w = (torch.sigmoid(x - torch.log(Lr)) if kind == "sigmoid" else torch.clamp(x, min=0) / Lr) * mask
        return (w @ v).transpose(1, 2)
    score, phi, reweight = stages(kind)
    if score == "cos":
        qh = q / torch.clamp(q.norm(dim=-1, keepdim=True), min=1e-12)
        kh = k / torch.clamp(k.norm(dim=-1, keepdim=True), min=1e-12)
        x = math.log(temp_d or D) * torch.log(n) * (qh @ kh.transpose(-1, -2))
    else:
        x = q @ k.transpose(-1, -2) / math.sqrt(D)
        if score == "ssmax":
            x = x * s.view(1, H, 1, 1) * torch.log(n)
    if phi == "exp":
        w = torch.softmax(x.masked_fill(~mask, float("-inf")), dim=-1)
        a = w
    else:
        a = softplus(x) * mask
        w = a / a.sum(-1, keepdim=True)
    if reweight:
        alpha = w
        o = (torch.arange(T) >= 3).to(q.dtype)[:, None]       # rows 0..2 are not inhibited
        u = (n * alpha - o).masked_fill(~mask, 0.0)
        r = torch.clamp(u, min=0)
        umax = r.amax(-1, keepdim=True)
        safe = torch.where(umax > 0, umax, torch.ones_like(umax))
        b = (r / safe) ** p                                   # = r^p / umax^p: same beta
        z = b.sum(-1, keepdim=True)
        beta = b / torch.where(z > 0, z, torch.ones_like(z))
        w = torch.where(z > 0, beta, alpha)                   # uniform row: beta = alpha
    y = w @ v
    return y.transpose(1, 2)


def gelu(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(P, cfg, inputs, targets=None):
    """P: dict name -> tensor; cfg: dict (layers, heads, dim, vocab, channels, pos, attn, p, tied);
    inputs, targets: (B, T, channels) int64 (targets may hold IGNORE).
    Returns (loss, per-position losses (B, T, channels), logits (channels, B, T, V))."""
    B, T, Ch = inputs.shape
    C, H, L = cfg["dim"], cfg["heads"], cfg["layers"]
    D = C // H
    x = sum(P[f"wte.{c}"][inputs[:, :, c]] for c in range(Ch))
    if cfg["pos"] == "learned":
        x = x + P["wpe"][:T][None]
    for l in range(L):
        pre = f"h.{l}."
        h = F.layer_norm(x, (C,), P[pre + "ln_1.weight"], P[pre + "ln_1.bias"], eps=1e-5)
        qkv = h @ P[pre + "attn.c_attn.weight"].T + P[pre + "attn.c_attn.bias"]
        q, k, v = (z.reshape(B, T, H, D) for z in qkv.split(C, dim=-1))
        if cfg["pos"] == "rope":
            q, k = rope(q, float(cfg.get("rope_base", 10000.0))), rope(k, float(cfg.get("rope_base", 10000.0)))
        y = attention(q, k, v, cfg["attn"], cfg["p"], P.get(pre + "attn.ssmax_s"), cfg.get("max_seq"),
                      cfg.get("len_norm", "train"), int(cfg.get("temp_d", 0)))
        y = y.reshape(B, T, C) @ P[pre + "attn.c_proj.weight"].T + P[pre + "attn.c_proj.bias"]
        x = x + y
        h = F.layer_norm(x, (C,), P[pre + "ln_2.weight"], P[pre + "ln_2.bias"], eps=1e-5)
        h = gelu(h @ P[pre + "mlp.c_fc.weight"].T + P[pre + "mlp.c_fc.bias"])
        x = x + h @ P[pre + "mlp.c_proj.weight"].T + P[pre + "mlp.c_proj.bias"]
    x = F.layer_norm(x, (C,), P["ln_f.weight"], P["ln_f.bias"], eps=1e-5)
    logits = torch.stack([x @ P[(f"wte.{c}" if cfg["tied"] else f"lm_head.{c}")].T for c in range(Ch)])
    if targets is None:
        return None, None, logits
    logp = torch.log_softmax(logits, dim=-1)                   # (Ch, B, T, V)
    tg = targets.permute(2, 0, 1)                              # (Ch, B, T)
    keep = tg != IGNORE
    nll = -logp.gather(-1, torch.where(keep, tg, torch.zeros_like(tg))[..., None])[..., 0] * keep
    count = keep.sum()
    loss = nll.sum() / count if count > 0 else nll.sum() * 0
    return loss, nll.permute(1, 2, 0), logits
