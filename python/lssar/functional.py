"""functional.py - lssar.attention: causal attention through liblssar.

Layouts: PyTorch's (B, H, T, D) outside, the library's (B, T, H, D) inside (one transpose and copy
each way). CPU tensors run lssar_attn_forward / _backward (float32); CUDA tensors run the fused
kernels (lssar_attn_forward_cuda / _backward_cuda; float32 or bfloat16) on PyTorch's current
stream, with the workspace the forward fills and the backward reads. Nothing goes through the
host on the CUDA path.

Two registrations of the same C calls (_forward, _backward):
  - PyTorch 2.4 and later: the custom ops lssar::attention_fwd / lssar::attention_bwd
    (torch.library.custom_op), with fake implementations (shapes only) and the backward
    registered for autograd, so torch.compile puts the op in its graph (fullgraph=True works)
    instead of tracing into ctypes;
  - older PyTorch (Debian's 1.13): a torch.autograd.Function, and under torch.compile (2.1 to 2.3)
    a graph break around it (torch.compiler.disable).
"""
import ctypes

import torch

from . import _lib


def _desc(kind, p, len_norm, train_len, temp_d, s_ptr):
    return _lib.AttnDesc(kind=kind, p=float(p), ssmax_s=s_ptr, len_norm=len_norm, train_len=int(train_len),
                         temp_d=int(temp_d))


def _stream(t):
    return ctypes.c_void_p(torch.cuda.current_stream(t.device).cuda_stream)


def _config(kind, len_norm, has_s):
    """Kind and len_norm names -> the library's ids; the library refuses unknown names (lssar.Error)."""
    kid = _lib.parse_kind(kind)
    ln = _lib.parse_len_norm(len_norm)
    if has_s != (_lib.stages(kid).score == _lib.SCORE_SSMAX):
        raise ValueError("lssar.attention: ssmax_s (H per-head scales) goes with the kinds whose score is ssmax "
                         "('ssmax', 'ssmax+rw', 'lssa+ssmax', ...) and only with them")
    return kid, ln


def _workspace_bytes(q, kid, p, ln, train_len, temp_d, has_s):
    if not q.is_cuda:
        return 0
    B, T, H, D = q.shape
    dt = _lib.BF16 if q.dtype == torch.bfloat16 else _lib.F32
    # only the presence of the scales matters to the size, not their address (a fake tensor has none)
    d = _desc(kid, p, ln, train_len, temp_d, 1 if has_s else None)
    return _lib.cuda_workspace_size(ctypes.byref(d), dt, B, T, H, D)


def _forward(q, k, v, s, kind, p, len_norm, train_len, temp_d):
    """q, k, v: (B, T, H, D); s: (H,) float32 or None. Returns (out, workspace); the workspace is
    empty on the CPU."""
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    kid, ln = _config(kind, len_norm, s is not None)
    B, T, H, D = q.shape
    d = _desc(kid, p, ln, train_len, temp_d, s.data_ptr() if s is not None else None)
    out = torch.empty_like(q)
    ws = torch.empty(_workspace_bytes(q, kid, p, ln, train_len, temp_d, s is not None), dtype=torch.uint8, device=q.device)
    if q.is_cuda:
        dt = _lib.BF16 if q.dtype == torch.bfloat16 else _lib.F32
        rc = _lib.attn_forward_cuda(ctypes.byref(d), dt, B, T, H, D, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                    out.data_ptr(), ws.data_ptr(), _stream(q))
        _lib.check(rc, "lssar_attn_forward_cuda")
    else:
        rc = _lib.attn_forward(ctypes.byref(d), B, T, H, D, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr())
        _lib.check(rc, "lssar_attn_forward")
    return out, ws


def _backward(q, k, v, out, dout, s, ws, kind, p, len_norm, train_len, temp_d):
    """The gradients (dq, dk, dv, ds) of _forward's out; ds is zeros(H) with s, else empty."""
    q, k, v, out, dout = (t.contiguous() for t in (q, k, v, out, dout))
    kid, ln = _config(kind, len_norm, s is not None)
    B, T, H, D = q.shape
    d = _desc(kid, p, ln, train_len, temp_d, s.data_ptr() if s is not None else None)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    ds = torch.zeros(H if s is not None else 0, dtype=torch.float32, device=q.device)
    dsp = ds.data_ptr() if s is not None else None
    if q.is_cuda:
        dt = _lib.BF16 if q.dtype == torch.bfloat16 else _lib.F32
        rc = _lib.attn_backward_cuda(ctypes.byref(d), dt, B, T, H, D, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                     out.data_ptr(), dout.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(),
                                     dsp, ws.data_ptr(), _stream(q))
        _lib.check(rc, "lssar_attn_backward_cuda")
    else:
        rc = _lib.attn_backward(ctypes.byref(d), B, T, H, D, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                dout.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), dsp)
        _lib.check(rc, "lssar_attn_backward")
    return dq, dk, dv, ds


class _Attention(torch.autograd.Function):
    """The op for PyTorch without torch.library.custom_op."""
    @staticmethod
    def forward(ctx, q, k, v, s, kind, p, len_norm, train_len, temp_d):
        out, ws = _forward(q, k, v, s, kind, p, len_norm, train_len, temp_d)
        ctx.save_for_backward(q, k, v, out, s, ws)
        ctx.cfg = (kind, p, len_norm, train_len, temp_d)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, s, ws = ctx.saved_tensors
        dq, dk, dv, ds = _backward(q, k, v, out, dout, s, ws, *ctx.cfg)
        return dq, dk, dv, ds if s is not None else None, None, None, None, None, None


CUSTOM_OP = hasattr(torch, "library") and hasattr(torch.library, "custom_op") and \
    hasattr(torch.library, "register_autograd") and hasattr(torch.library, "register_fake")

if CUSTOM_OP:
    from typing import Optional, Tuple

    @torch.library.custom_op("lssar::attention_fwd", mutates_args=())
    def _op_fwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, s: Optional[torch.Tensor], kind: str, p: float,
                len_norm: str, train_len: int, temp_d: int) -> Tuple[torch.Tensor, torch.Tensor]:
        return _forward(q, k, v, s, kind, p, len_norm, train_len, temp_d)

    @_op_fwd.register_fake
    def _(q, k, v, s, kind, p, len_norm, train_len, temp_d):
        kid, ln = _config(kind, len_norm, s is not None)   # refused names fail while tracing, as in eager
        if all(isinstance(x, int) for x in q.shape):
            n = _workspace_bytes(q, kid, p, ln, train_len, temp_d, s is not None)
        else:   # symbolic shapes: the size is the library's to say, at run time
            n = 0 if not q.is_cuda else torch.library.get_ctx().new_dynamic_size()
        return q.new_empty(q.shape), q.new_empty(n, dtype=torch.uint8)

    @torch.library.custom_op("lssar::attention_bwd", mutates_args=())
    def _op_bwd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor, dout: torch.Tensor,
                s: Optional[torch.Tensor], ws: torch.Tensor, kind: str, p: float, len_norm: str, train_len: int,
                temp_d: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        return _backward(q, k, v, out, dout, s, ws, kind, p, len_norm, train_len, temp_d)

    @_op_bwd.register_fake
    def _(q, k, v, out, dout, s, ws, kind, p, len_norm, train_len, temp_d):
        H = q.shape[2]
        return (q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape),
                q.new_empty(H if s is not None else 0, dtype=torch.float32))

    def _setup_context(ctx, inputs, output):
        q, k, v, s, kind, p, len_norm, train_len, temp_d = inputs
        out, ws = output
        ctx.save_for_backward(q, k, v, out, s, ws)
        ctx.cfg = (kind, p, len_norm, train_len, temp_d)

    def _op_backward(ctx, dout, dws):
        q, k, v, out, s, ws = ctx.saved_tensors
        dq, dk, dv, ds = _op_bwd(q, k, v, out, dout, s, ws, *ctx.cfg)
        return dq, dk, dv, ds if s is not None else None, None, None, None, None, None

    torch.library.register_autograd("lssar::attention_fwd", _op_backward, setup_context=_setup_context)

    def _apply(q, k, v, s, kind, p, len_norm, train_len, temp_d):
        return _op_fwd(q, k, v, s, kind, p, len_norm, train_len, temp_d)[0]
else:
    def _apply(q, k, v, s, kind, p, len_norm, train_len, temp_d):
        return _Attention.apply(q, k, v, s, kind, p, len_norm, train_len, temp_d)

    # torch.compile (PyTorch 2.1 to 2.3) runs the op eagerly, with a graph break around it, instead
    # of tracing into the ctypes calls
    if hasattr(torch, "compiler") and hasattr(torch.compiler, "disable"):
        _apply = torch.compiler.disable(_apply)


def attention(q, k, v, kind="lssar", p=15.0, ssmax_s=None, len_norm="train", train_len=None, temp_d=0):
    """Causal attention of q, k, v (B, H, T, D) -> (B, H, T, D), as torch's scaled_dot_product_attention
    with is_causal=True lays them out.

    kind: "softmax", "ssmax", "lssa", "lssar" (LSSA then re-weighting with power p), "sigmoid" or
    "relu", or a preset with other stages: "softmax+cos+rw", "ssmax+rw", "lssa+dot", ...
    (docs/attention.md "Stages"); p is the power of every kind that re-weights. ssmax_s: SSMax's
    per-head scales (H,), float32 on q's device, differentiable; required for the kinds whose
    score is ssmax and refused otherwise. len_norm, train_len: sigmoid / relu
    divide by the training length ("train"; train_len, default T) or by each row's key count
    ("row"). temp_d: lssa / lssar, the D of the ln(D) ln(n) temperature (0: the head size).

    CPU tensors: float32. CUDA tensors: float32 or bfloat16 (bf16 tensor-core products, float32
    accumulation), needing a CUDA build of liblssar. Invalid arguments raise lssar.Error (a
    ValueError) or TypeError with the library's message.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError("lssar.attention: %s must be a torch.Tensor, got %s" % (name, type(t).__name__))
        if t.dim() != 4:
            raise ValueError("lssar.attention: %s must be (B, H, T, D), got shape %s" % (name, tuple(t.shape)))
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError("lssar.attention: q, k and v must have one shape (B, H, T, D) (causal self-attention); got %s, %s, %s"
                         % (tuple(q.shape), tuple(k.shape), tuple(v.shape)))
    if k.device != q.device or v.device != q.device:
        raise ValueError("lssar.attention: q, k and v must be on one device; got %s, %s, %s" % (q.device, k.device, v.device))
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError("lssar.attention: q, k and v must have one dtype; got %s, %s, %s" % (q.dtype, k.dtype, v.dtype))
    if q.device.type == "cpu":
        if q.dtype != torch.float32:
            raise TypeError("lssar.attention: CPU tensors must be float32 (the C kernels' type), got %s" % q.dtype)
    elif q.device.type == "cuda":
        if q.dtype not in (torch.float32, torch.bfloat16):
            raise TypeError("lssar.attention: CUDA tensors must be float32 or bfloat16, got %s" % q.dtype)
    else:
        raise ValueError("lssar.attention: device %s is not supported (cpu or cuda)" % q.device)
    B, H, T, D = q.shape
    if ssmax_s is not None:
        if not isinstance(ssmax_s, torch.Tensor) or ssmax_s.shape != (H,) or ssmax_s.dtype != torch.float32 \
                or ssmax_s.device != q.device:
            raise ValueError("lssar.attention: ssmax_s must be a float32 tensor of shape (%d,) on %s" % (H, q.device))
        ssmax_s = ssmax_s.contiguous()
    qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))   # (B, T, H, D)
    # kind and len_norm go to the op as names: the library parses them (and refuses bad ones) inside it
    y = _apply(qt, kt, vt, ssmax_s, str(kind), float(p), str(len_norm), T if train_len is None else int(train_len), int(temp_d))
    return y.transpose(1, 2)
