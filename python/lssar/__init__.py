"""lssar for PyTorch: liblssar's attention kernels as a differentiable op and a module.

    import lssar
    y = lssar.attention(q, k, v, kind="lssar", p=15.0)       # (B, H, T, D), causal
    attn = lssar.CausalSelfAttention(dim=256, heads=4, kind="lssar")

The package is a thin layer over the C library (no second implementation): see docs/pytorch.md.
"""
from . import _lib
from ._lib import Error
from .functional import attention
from .nn import CausalSelfAttention

__version__ = _lib.version
library = _lib.path    # the liblssar.so in use


def cuda_available():
    """True when the library was built with CUDA and sees a GPU."""
    return _lib.cuda_device_count() > 0


__all__ = ["attention", "CausalSelfAttention", "Error", "cuda_available", "library", "__version__"]
