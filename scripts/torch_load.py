#!/usr/bin/env python3
"""torch_load.py - load an lssar model.safetensors into PyTorch and compute the same losses.

    python3 scripts/torch_load.py RUN_DIR                       # print the config and tensor names
    python3 scripts/torch_load.py RUN_DIR --shard val.bin --seq 64 [--windows 8] [--json out.json]

The second form evaluates the model in PyTorch (float64) on the same windows as
`lssar eval --data val.bin --seq 64 --batches 1 --batch 8` (windows of T + 1 tokens starting every
T tokens from the start of the shard) and prints the mean loss; --json also writes the per-position
loss.

As a library:

    from torch_load import load_safetensors, load_model
    tensors, meta = load_safetensors("run/model.safetensors")   # numpy arrays + metadata strings
    model = load_model("run")                                   # torch.nn.Module, eval mode
    logits = model(idx)      # idx (B, T, channels) int64 -> list of channels x (B, T, vocab)

The model here is a plain reference of lssar's architecture written from docs/pytorch.md and the
attention contract (spec attention.md): GPT-2 pre-LayerNorm blocks, GELU (tanh) MLP, rotate-half
RoPE / learned / no positions, one embedding table per token channel (summed) and one output head
per channel, and the four attention kinds with the T x T matrices materialised (fine for checking,
not for long sequences). It needs only numpy and torch; the `safetensors` package is used for
reading when it is installed, else 20 lines of plain Python below do it.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
          "I16": np.int16, "I8": np.int8, "U64": np.uint64, "U32": np.uint32, "U16": np.uint16,
          "U8": np.uint8, "BOOL": np.bool_}


def load_safetensors(path):
    """Read a .safetensors file with plain Python + numpy: ({name: array}, {key: str})."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])            # header length, little-endian uint64
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    tensors = {}
    for name, h in header.items():
        begin, end = h["data_offsets"]
        dt = np.dtype(DTYPES[h["dtype"]]).newbyteorder("<")
        arr = np.frombuffer(data, dtype=dt, count=(end - begin) // dt.itemsize, offset=base + begin)
        tensors[name] = arr.reshape(h["shape"])
    return tensors, meta


def load_safetensors_any(path):
    """The `safetensors` package if installed (same result), else load_safetensors."""
    try:
        from safetensors import safe_open
    except ImportError:
        return load_safetensors(path)
    with safe_open(path, framework="numpy") as f:
        return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})


def config_from_metadata(meta):
    """lssar's model config: one metadata string per field (see docs/pytorch.md)."""
    if meta.get("lssar_format") != "gpt-v1":
        raise ValueError("not an lssar model file (metadata lssar_format is %r)" % meta.get("lssar_format"))
    ints = ("layers", "heads", "dim", "vocab", "channels", "max_seq", "tied", "step")
    cfg = {k: int(meta[k]) for k in ints}
    cfg.update(pos=meta["pos"], attn=meta["attn"], p=float(meta["p"]),
               len_norm=meta.get("len_norm", "train"),   # files from before the field: train
               rope_base=float(meta.get("rope_base", 10000.0)),   # before these: base 10000,
               temp_d=int(meta.get("temp_d", 0)))                 # ln of the head size
    return cfg


def read_shard(path):
    """llm.c token shard -> uint16 array (positions, channels)."""
    header = np.fromfile(path, dtype="<i4", count=256)
    if header[0] != 20240520:
        raise ValueError("%s: not a token shard (magic %d)" % (path, header[0]))
    n, c = int(header[2]), max(1, int(header[3]))
    tok = np.fromfile(path, dtype="<u2", offset=1024)
    return tok[: n * c].reshape(n, c)


def attention(q, k, v, kind, p=15.0, s=None, L=None, len_norm="train", temp_d=0):
    """Causal attention, q k v (B, H, T, D) -> (B, H, T, D), exactly as spec/attention.md.
    L, len_norm: sigmoid / relu (the training length max_seq; "train" or "row"). temp_d: lssa /
    lssar, the D of the ln(D) ln(n) temperature (0: the head size)."""
    import torch
    T, D = q.shape[-2], q.shape[-1]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    n = torch.arange(1, T + 1, dtype=q.dtype).view(T, 1)          # visible keys n_i
    if kind in ("sigmoid", "relu"):                               # no row normalisation
        Lr = n if len_norm == "row" else torch.full_like(n, float(L))
        x = q @ k.transpose(-1, -2) / math.sqrt(D)
        w = torch.sigmoid(x - torch.log(Lr)) if kind == "sigmoid" else x.clamp_min(0) / Lr
        return (w * mask) @ v
    if kind in ("softmax", "ssmax"):
        x = q @ k.transpose(-1, -2) / math.sqrt(D)
        if kind == "ssmax":
            x = x * s.view(1, -1, 1, 1) * torch.log(n)
        w = torch.softmax(x.masked_fill(~mask, float("-inf")), dim=-1)
        return w @ v
    qh = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    kh = k / k.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    x = math.log(temp_d or D) * torch.log(n) * (qh @ kh.transpose(-1, -2))
    a = (x.clamp_min(0) + torch.log1p(torch.exp(-x.abs()))) * mask   # softplus, no overflow
    alpha = a / a.sum(-1, keepdim=True)
    if kind == "lssa":
        return alpha @ v
    o = (torch.arange(T) >= 3).to(q.dtype).view(T, 1)                 # rows 0..2 not inhibited
    u = (n * alpha - o).clamp_min(0) * mask
    umax = u.amax(-1, keepdim=True)
    b = (u / umax.clamp_min(1e-300)) ** p                             # (u / max u)^p: same beta
    z = b.sum(-1, keepdim=True)
    beta = torch.where(z > 0, b / z.clamp_min(1e-300), alpha)         # uniform row: keep alpha
    return beta @ v


def rope(x, theta=10000.0):
    """Rotate-half RoPE on x (B, H, T, D): pairs (c, c + D/2), angle t * theta^(-2c/D)."""
    import torch
    T, D = x.shape[-2], x.shape[-1]
    h = D // 2
    inv = theta ** (-2.0 * torch.arange(h, dtype=torch.float64) / D)
    ang = torch.arange(T, dtype=torch.float64).view(T, 1) * inv.view(1, h)
    cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def build_model(tensors, cfg, dtype=None):
    """A torch.nn.Module holding the weights (float64 by default, for checking)."""
    import torch
    import torch.nn.functional as F
    dtype = dtype or torch.float64

    class GPT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.cfg = cfg
            self.w = torch.nn.ParameterDict()
            for name, arr in tensors.items():
                self.w[name.replace(".", "__")] = torch.nn.Parameter(torch.tensor(np.array(arr), dtype=dtype))

        def W(self, name):
            return self.w[name.replace(".", "__")]

        def forward(self, idx):
            """idx (B, T, channels) int64 -> list over channels of logits (B, T, vocab)."""
            c = self.cfg
            B, T, Ch = idx.shape
            C, NH = c["dim"], c["heads"]
            HS = C // NH
            x = sum(self.W("wte.%d" % ch)[idx[..., ch]] for ch in range(Ch))
            if c["pos"] == "learned":
                x = x + self.W("wpe")[:T]
            for l in range(c["layers"]):
                P = "h.%d." % l
                h = F.layer_norm(x, (C,), self.W(P + "ln_1.weight"), self.W(P + "ln_1.bias"), eps=1e-5)
                qkv = F.linear(h, self.W(P + "attn.c_attn.weight"), self.W(P + "attn.c_attn.bias"))
                q, k, v = (t.view(B, T, NH, HS).transpose(1, 2) for t in qkv.split(C, dim=-1))
                if c["pos"] == "rope":
                    q, k = rope(q, c["rope_base"]), rope(k, c["rope_base"])
                s = self.W(P + "attn.ssmax_s") if c["attn"] == "ssmax" else None
                y = attention(q, k, v, c["attn"], c["p"], s, c["max_seq"], c["len_norm"], c["temp_d"])
                y = y.transpose(1, 2).reshape(B, T, C)
                x = x + F.linear(y, self.W(P + "attn.c_proj.weight"), self.W(P + "attn.c_proj.bias"))
                h = F.layer_norm(x, (C,), self.W(P + "ln_2.weight"), self.W(P + "ln_2.bias"), eps=1e-5)
                h = F.gelu(F.linear(h, self.W(P + "mlp.c_fc.weight"), self.W(P + "mlp.c_fc.bias")), approximate="tanh")
                x = x + F.linear(h, self.W(P + "mlp.c_proj.weight"), self.W(P + "mlp.c_proj.bias"))
            x = F.layer_norm(x, (C,), self.W("ln_f.weight"), self.W("ln_f.bias"), eps=1e-5)
            head = "wte.%d" if c["tied"] else "lm_head.%d"
            return [F.linear(x, self.W(head % ch)) for ch in range(Ch)]

        def losses(self, idx, targets):
            """Per-position loss (B, T), averaged over channels, like lssar's."""
            logits = self.forward(idx)
            per = [F.cross_entropy(lg.transpose(1, 2), targets[..., ch], reduction="none") for ch, lg in enumerate(logits)]
            return sum(per) / len(per)

    return GPT().eval()


def load_model(path, dtype=None):
    """Run directory or .safetensors file -> the model (config in model.cfg)."""
    if os.path.isdir(path):
        path = os.path.join(path, "model.safetensors")
    tensors, meta = load_safetensors_any(path)
    return build_model(tensors, config_from_metadata(meta), dtype)


def eval_windows(model, shard_path, T, windows):
    """Mean loss and per-position loss on the first `windows` windows (lssar eval's: T + 1 tokens
    starting every T tokens)."""
    import torch
    tok = read_shard(shard_path).astype(np.int64)
    nw = min(windows, (len(tok) - 1) // T)
    w = np.stack([tok[i * T: i * T + T + 1] for i in range(nw)])     # (nw, T+1, C)
    idx, tgt = torch.tensor(w[:, :-1]), torch.tensor(w[:, 1:])
    with torch.no_grad():
        per = model.losses(idx, tgt)                                  # (nw, T)
    return per.mean().item(), per.mean(0).tolist(), nw


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help="run directory or model .safetensors file")
    ap.add_argument("--shard", help="token shard to evaluate on")
    ap.add_argument("--seq", type=int, default=0, help="context length")
    ap.add_argument("--windows", type=int, default=8, help="windows to evaluate")
    ap.add_argument("--json", help="write {seq, loss, windows, per_position} here")
    a = ap.parse_args()
    path = os.path.join(a.model, "model.safetensors") if os.path.isdir(a.model) else a.model
    tensors, meta = load_safetensors_any(path)
    cfg = config_from_metadata(meta)
    print("config:", json.dumps(cfg))
    if not a.shard:
        for k, v in tensors.items():
            print("  %-28s %-4s %s" % (k, v.dtype, tuple(v.shape)))
        return 0
    model = build_model(tensors, cfg)
    T = a.seq or cfg["max_seq"]
    loss, per, nw = eval_windows(model, a.shard, T, a.windows)
    print("seq %d: loss %.6f over %d windows" % (T, loss, nw))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"seq": T, "loss": loss, "windows": nw, "per_position": per}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
