#!/usr/bin/env python3
"""gpt2_torch_bench.py - PyTorch's own GPT-2 training step, timed, for comparison with `lssar bench`.

A standard GPT-2 (124M by default: 12 layers, width 768, 12 heads, vocabulary 50304, learned
positions, pre-LayerNorm, GELU (tanh), MLP 4x, tied input / output embeddings, GPT-2's
initialisation) written here as plain nn.Modules, trained on random tokens at B = 16, T = 1024:
one step = zero_grad, forward under bf16 autocast (CUDA; fp32 on the CPU unless --amp bf16),
cross-entropy, backward, gradient clipping to norm 1, AdamW (fused on CUDA; lr 1e-4, betas 0.9 /
0.95, weight decay 0.1 on 2-D weights), as `lssar bench` times its own step. Timed in eager mode
and under torch.compile (each on a fresh model of the same seed), after --warmup untimed steps
(the compiled mode's first steps compile: their time is reported as compile_s).

Attention: softmax through F.scaled_dot_product_attention (causal; flash on a GPU) where torch
has it, else written out; --attn lssar: LSSAR written plainly in PyTorch (scripts/attn_torch.py,
the T x T matrices materialised, fp32 inside; the same function gpu_attn_torch.py times).

Reported per (attn, mode): ms/step (median, p10, p90), tokens/s, TFLOP/s with FLOPs/step =
(6 N + 12 L C T) B T (N = parameter count, the tied embedding counted once: `lssar bench`'s
formula), MFU = that / the device's peak (dense bf16 from the GPU's name: H100 / H200 SXM 989.4
TFLOP/s, H100 PCIe 756, A100 312; or --peak-tflops; none on the CPU without it), peak memory
(CUDA: torch.cuda.max_memory_allocated, and max_memory_reserved; CPU: the process's peak RSS),
the first and last loss (finite, or the row fails).

  gpt2_torch_bench.py [--device cuda|cpu|auto] [--attn softmax,lssar] [--modes eager,compile]
                      [--layers 12 --dim 768 --heads 12 --vocab 50304 --batch 16 --seq 1024]
                      [--warmup 3] [--iters 10] [--peak-tflops X] [--json FILE]

JSON: {"skipped", "torch", "device", "device_name", "config", "params", "flop_per_step",
"peak_tflops", "results": [{"attn", "mode", "status" (ok / skipped / error), "reason",
"ms_per_step", "ms_p10", "ms_p90", "tokens_per_s", "tflops", "mfu", "peak_memory_bytes",
"peak_reserved_bytes", "compile_s", "loss_first", "loss_last"}], "notes"}.
Exit 0 when every row is ok or skipped (torch without torch.compile: the compiled rows are
skipped, saying so), 1 when one failed (out of memory, a non-finite loss), 2 on bad arguments.
--device cuda without a usable GPU: one line "SKIP: ..." and exit 0 (the JSON says skipped).
"""
import argparse
import gc
import json
import math
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def write(path, obj):
    if path:
        with open(path, "w") as f:
            json.dump(obj, f, indent=1)


def peak_tflops_of(name):
    """Dense bf16 peak TFLOP/s of a GPU from its name (NVIDIA's data sheets, no sparsity); None if unknown."""
    if "H100" in name and "PCIe" in name:
        return 756.0
    if any(g in name for g in ("H100", "H200", "H800")):
        return 989.4
    if "A100" in name or "A800" in name:
        return 312.0
    return None


ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--device", default="cuda", help="cuda, cpu or auto (cuda when torch sees a GPU)")
ap.add_argument("--attn", default="softmax", help="attention kinds, a list: softmax, lssar")
ap.add_argument("--modes", default="eager,compile", help="eager, compile (torch.compile), a list")
ap.add_argument("--layers", type=int, default=12)
ap.add_argument("--dim", type=int, default=768)
ap.add_argument("--heads", type=int, default=12)
ap.add_argument("--vocab", type=int, default=50304)
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--seq", type=int, default=1024)
ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (compile: includes compiling)")
ap.add_argument("--iters", type=int, default=10, help="timed steps")
ap.add_argument("--amp", default=None, help="bf16 or none (default: bf16 on CUDA, none on the CPU)")
ap.add_argument("--peak-tflops", type=float, default=None, help="peak TFLOP/s for MFU (default: from the GPU's name)")
ap.add_argument("--threads", type=int, default=0, help="CPU threads for torch (0: its default)")
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--json", default=None)
args = ap.parse_args()

attns = [a for a in args.attn.split(",") if a]
modes = [m for m in args.modes.split(",") if m]
bad = [a for a in attns if a not in ("softmax", "lssar")] + [m for m in modes if m not in ("eager", "compile")]
if bad or not attns or not modes:
    ap.error(f"unknown or missing --attn / --modes value(s) {bad}: use --attn softmax,lssar and --modes eager,compile")
for name in ("layers", "dim", "heads", "vocab", "batch", "seq", "iters"):
    if getattr(args, name) < 1:
        ap.error(f"--{name} must be >= 1")
if args.warmup < 0:
    ap.error("--warmup must be >= 0")
if args.dim % args.heads:
    ap.error(f"--dim {args.dim} is not a multiple of --heads {args.heads}")
if args.device not in ("cuda", "cpu", "auto"):
    ap.error(f"--device '{args.device}': use cuda, cpu or auto")
if args.amp not in (None, "bf16", "none"):
    ap.error(f"--amp '{args.amp}': use bf16 or none")

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    sys.path.insert(0, HERE)
    from attn_torch import lssar_plain, softmax_plain  # scripts/attn_torch.py
except Exception as e:  # noqa: BLE001 - any import failure means no torch here
    print(f"SKIP: cannot import torch ({e})")
    write(args.json, {"skipped": True, "reason": f"cannot import torch: {e}"})
    sys.exit(0)

if args.device == "auto":
    args.device = "cuda" if torch.cuda.is_available() else "cpu"
if args.device == "cuda" and not torch.cuda.is_available():
    reason = f"torch {torch.__version__}: torch.cuda.is_available() is False"
    print(f"SKIP: no CUDA GPU for PyTorch ({reason})")
    write(args.json, {"skipped": True, "reason": reason})
    sys.exit(0)
if args.threads > 0:
    torch.set_num_threads(args.threads)
cuda = args.device == "cuda"
dev = torch.device(args.device)
amp = (args.amp or ("bf16" if cuda else "none")) == "bf16"
HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")
HAVE_COMPILE = hasattr(torch, "compile")
if cuda:
    torch.backends.cuda.matmul.allow_tf32 = True   # fp32 matmuls outside autocast (none in the step)
    torch.backends.cudnn.allow_tf32 = True


# ---------------------------------------------------------------- the model (standard GPT-2)
class CausalSelfAttention(nn.Module):
    def __init__(self, C, H, kind):
        super().__init__()
        self.H, self.kind = H, kind
        self.c_attn = nn.Linear(C, 3 * C)   # q, k, v = x W^T + b
        self.c_proj = nn.Linear(C, C)

    def forward(self, x):                  # x (B, T, C)
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H) for t in (q, k, v))   # (B, T, H, D)
        if self.kind == "lssar":
            # fp32 inside, as in gpu_attn_torch.py: autocast would round its matmuls to bf16,
            # and p = 15 amplifies the relative error of u fifteen-fold
            with torch.autocast(device_type=x.device.type, enabled=False):
                y = lssar_plain(q, k, v)                                      # (B, T, H, D)
        elif HAVE_SDPA:                  # (B, H, T, D) views; flash on a GPU
            y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               is_causal=True).transpose(1, 2)
        else:                            # torch < 2.0 (Debian's 1.13): written out
            y = softmax_plain(q, k, v).to(q.dtype)
        return self.c_proj(y.reshape(B, T, C))


class Block(nn.Module):
    def __init__(self, C, H, kind):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, H, kind)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):                  # pre-LayerNorm residual blocks
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, H, V, T, kind):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList(Block(C, H, kind) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.wte.weight   # tied
        for name, p in self.named_parameters():  # GPT-2: N(0, 0.02), residual projections / sqrt(2L)
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):       # idx, targets (B, T)
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for blk in self.h:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def make_optimizer(model):
    decay = [p for p in model.parameters() if p.dim() >= 2]       # weights and the embeddings
    other = [p for p in model.parameters() if p.dim() < 2]        # biases, LayerNorm
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}]
    kw = {"lr": 1e-4, "betas": (0.9, 0.95), "eps": 1e-8}
    if cuda:
        try:
            return torch.optim.AdamW(groups, fused=True, **kw), "fused"
        except (TypeError, RuntimeError) as e:
            notes.append(f"fused AdamW unavailable ({e}): foreach/default AdamW")
    return torch.optim.AdamW(groups, **kw), "default"


def num_params(model):
    return sum(p.numel() for p in model.parameters())   # parameters() yields the tied one once


def sync():
    if cuda:
        torch.cuda.synchronize()


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # Linux: kilobytes


def quantiles(v):
    v = sorted(v)
    pick = lambda p: v[min(len(v) - 1, max(0, int(round(p * (len(v) - 1)))))]  # noqa: E731
    return pick(0.5), pick(0.1), pick(0.9)


# ---------------------------------------------------------------- timing
L, C, H, V, B, T = args.layers, args.dim, args.heads, args.vocab, args.batch, args.seq
notes = []
dev_name = torch.cuda.get_device_name(0) if cuda else "cpu"
peak = args.peak_tflops if args.peak_tflops else (peak_tflops_of(dev_name) if cuda else None)
g = torch.Generator().manual_seed(args.seed + 1)
data = torch.randint(0, V, (2, B, T), generator=g).to(dev)   # inputs, targets: random tokens
out = {
    "skipped": False,
    "torch": torch.__version__,
    "cuda": torch.version.cuda if cuda else None,
    "device": args.device,
    "device_name": dev_name,
    "config": {"layers": L, "dim": C, "heads": H, "vocab": V, "batch": B, "seq": T, "pos": "learned",
               "tied": True, "amp": "bf16" if amp else "fp32", "warmup": args.warmup, "iters": args.iters,
               "sdpa": HAVE_SDPA, "torch_compile": HAVE_COMPILE},
    "peak_tflops": peak,
    "results": [],
    "notes": notes,
}
if not HAVE_SDPA:
    notes.append(f"torch {torch.__version__} has no F.scaled_dot_product_attention: softmax written out (T x T)")
print(f"gpt2_torch_bench: torch {torch.__version__} on {dev_name}, L={L} C={C} H={H} V={V} B={B} T={T}, "
      f"{'bf16 autocast' if amp else 'fp32'}", flush=True)
print(f"{'attn':8} {'mode':8} {'ms/step':>10} {'tok/s':>10} {'TFLOP/s':>9} {'MFU':>7} {'peak MiB':>10} {'compile s':>10}", flush=True)


def run(kind, mode):
    row = {"attn": kind, "mode": mode}
    if mode == "compile" and not HAVE_COMPILE:
        row.update(status="skipped", reason=f"torch {torch.__version__} has no torch.compile (2.0 and later)")
        print(f"{kind:8} {mode:8} skipped: {row['reason']}", flush=True)
        return row
    torch.manual_seed(args.seed)
    model = GPT(L, C, H, V, T, kind).to(dev)
    opt, opt_kind = make_optimizer(model)
    row["adamw"] = opt_kind
    N = num_params(model)
    out["params"] = N
    flop = (6.0 * N + 12.0 * L * C * T) * B * T
    out["flop_per_step"] = flop
    fwd = torch.compile(model) if mode == "compile" else model
    x, y = data[0], data[1]

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=args.device, dtype=torch.bfloat16, enabled=amp):
            loss = fwd(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    try:
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        t0 = time.perf_counter()
        losses = []
        for _ in range(args.warmup):
            losses.append(step().item())
        sync()
        row["compile_s"] = time.perf_counter() - t0 if mode == "compile" else None
        times = []
        for _ in range(args.iters):
            sync()
            t1 = time.perf_counter()
            loss = step()
            sync()
            times.append(1e3 * (time.perf_counter() - t1))
            losses.append(loss.item())   # after the clock stopped: no sync inside the step
        med, p10, p90 = quantiles(times)
        mem = torch.cuda.max_memory_allocated() if cuda else peak_rss_bytes()
        tflops = flop / (med * 1e-3) / 1e12
        row.update(status="ok", ms_per_step=med, ms_p10=p10, ms_p90=p90, tokens_per_s=B * T / (med * 1e-3),
                   tflops=tflops, mfu=tflops / peak if peak else None, peak_memory_bytes=mem,
                   peak_reserved_bytes=torch.cuda.max_memory_reserved() if cuda else None,
                   loss_first=losses[0], loss_last=losses[-1])
        if not all(math.isfinite(v) for v in losses):
            row.update(status="error", reason=f"non-finite loss: {losses}")
    except Exception as e:  # noqa: BLE001 - out of memory, a compile failure: a row, not a crash
        row.update(status="error", reason=f"{type(e).__name__}: {str(e)[:400]}")
    fwd = model = opt = step = None   # free the model before the next row
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    if row["status"] == "ok":
        mfu = f"{row['mfu']:.3f}" if row["mfu"] is not None else "-"
        cs = f"{row['compile_s']:.1f}" if row["compile_s"] is not None else "-"
        print(f"{kind:8} {mode:8} {row['ms_per_step']:10.2f} {row['tokens_per_s']:10.0f} {row['tflops']:9.2f} {mfu:>7} "
              f"{row['peak_memory_bytes'] / 2**20:10.0f} {cs:>10}", flush=True)
    else:
        print(f"{kind:8} {mode:8} {row['status'].upper()}: {row['reason']}", flush=True)
    return row


for kind in attns:
    for mode in modes:
        out["results"].append(run(kind, mode))
        write(args.json, out)   # a crash or timeout later keeps the rows so far
failed = [r for r in out["results"] if r["status"] == "error"]
sys.exit(1 if failed else 0)
