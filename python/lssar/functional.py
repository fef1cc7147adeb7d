"""functional.py - lssar.attention: causal attention through liblssar, as a torch.autograd.Function.

Layouts: PyTorch's (B, H, T, D) outside, the library's (B, T, H, D) inside (one transpose and copy
each way). CPU tensors run lssar_attn_forward / _backward (float32); CUDA tensors run the fused
kernels (lssar_attn_forward_cuda / _backward_cuda; float32 or bfloat16) on PyTorch's current
stream, with the workspace the forward fills and the backward reads. Nothing goes through the
host on the CUDA path.
"""
import ctypes

import torch

from . import _lib


def _desc(kind, p, len_norm, train_len, temp_d, s):
    return _lib.AttnDesc(kind=kind, p=float(p), ssmax_s=s.data_ptr() if s is not None else None,
                         len_norm=len_norm, train_len=int(train_len), temp_d=int(temp_d))


def _stream(t):
    return ctypes.c_void_p(torch.cuda.current_stream(t.device).cuda_stream)


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, s, kind, p, len_norm, train_len, temp_d):
        # q, k, v: (B, T, H, D) contiguous; s: (H,) float32 or None
        B, T, H, D = q.shape
        d = _desc(kind, p, len_norm, train_len, temp_d, s)
        out = torch.empty_like(q)
        ws = None
        if q.is_cuda:
            dt = _lib.BF16 if q.dtype == torch.bfloat16 else _lib.F32
            ws = torch.empty(_lib.cuda_workspace_size(ctypes.byref(d), dt, B, T, H, D), dtype=torch.uint8, device=q.device)
            rc = _lib.attn_forward_cuda(ctypes.byref(d), dt, B, T, H, D, q.data_ptr(), k.data_ptr(), v.data_ptr(),
                                        out.data_ptr(), ws.data_ptr(), _stream(q))
            _lib.check(rc, "lssar_attn_forward_cuda")
        else:
            rc = _lib.attn_forward(ctypes.byref(d), B, T, H, D, q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr())
            _lib.check(rc, "lssar_attn_forward")
        ctx.save_for_backward(q, k, v, out, s, ws)
        ctx.cfg = (kind, p, len_norm, train_len, temp_d)
        return out

    @staticmethod
    def backward(ctx, dout):
        q, k, v, out, s, ws = ctx.saved_tensors
        kind, p, len_norm, train_len, temp_d = ctx.cfg
        B, T, H, D = q.shape
        d = _desc(kind, p, len_norm, train_len, temp_d, s)
        dout = dout.contiguous()
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        ds = torch.zeros(H, dtype=torch.float32, device=q.device) if s is not None else None
        dsp = ds.data_ptr() if ds is not None else None
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
        return dq, dk, dv, ds, None, None, None, None, None


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
    kid = _lib.parse_kind(kind)
    ln = _lib.parse_len_norm(len_norm)
    B, H, T, D = q.shape
    if (ssmax_s is not None) != (_lib.stages(kid).score == _lib.SCORE_SSMAX):
        raise ValueError("lssar.attention: ssmax_s (H per-head scales) goes with the kinds whose score is ssmax "
                         "('ssmax', 'ssmax+rw', 'lssa+ssmax', ...) and only with them")
    if ssmax_s is not None:
        if not isinstance(ssmax_s, torch.Tensor) or ssmax_s.shape != (H,) or ssmax_s.dtype != torch.float32 \
                or ssmax_s.device != q.device:
            raise ValueError("lssar.attention: ssmax_s must be a float32 tensor of shape (%d,) on %s" % (H, q.device))
        ssmax_s = ssmax_s.contiguous()
    qt, kt, vt = (t.transpose(1, 2).contiguous() for t in (q, k, v))   # (B, T, H, D)
    y = _Attention.apply(qt, kt, vt, ssmax_s, kid, float(p), ln, T if train_len is None else int(train_len), int(temp_d))
    return y.transpose(1, 2)
