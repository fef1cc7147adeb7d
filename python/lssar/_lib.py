"""_lib.py - liblssar through ctypes: finding the library, the C types of include/lssar.h that the
package uses, and errors that carry the library's own message.

The library is, in order: $LSSAR_LIB (a path to liblssar.so), the copy that `make python` puts in
this package, or an installed one (ctypes.util.find_library). The structure below mirrors
lssar_attn_desc field for field; tests/test_python_package.py compiles a probe against lssar.h
and checks every offset, so the two cannot drift apart unnoticed.
"""
import ctypes
import ctypes.util
import glob
import os


class Error(ValueError):
    """An lssar call refused its arguments; the message is the library's."""


def _find():
    env = os.environ.get("LSSAR_LIB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    local = sorted(glob.glob(os.path.join(here, "liblssar.so*")))
    if local:
        return local[0]
    return ctypes.util.find_library("lssar")


_path = _find()
if not _path:
    raise ImportError("liblssar.so was not found: run `make python` in the lssar clone (it builds the "
                      "library and installs this package with it), or set LSSAR_LIB to liblssar.so")
lib = ctypes.CDLL(_path)
path = _path

c_int, c_float, c_void_p, c_size_t = ctypes.c_int, ctypes.c_float, ctypes.c_void_p, ctypes.c_size_t


class AttnDesc(ctypes.Structure):
    """lssar_attn_desc (include/lssar.h)."""
    _fields_ = [("kind", c_int), ("p", c_float), ("ssmax_s", c_void_p), ("len_norm", c_int),
                ("train_len", c_int), ("temp_d", c_int)]


def _proto(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype, f.argtypes = restype, list(argtypes)
    return f


class AttnStages(ctypes.Structure):
    """lssar_attn_stages (include/lssar.h)."""
    _fields_ = [("score", c_int), ("phi", c_int), ("norm", c_int), ("reweight", c_int)]


SCORE_SSMAX = 1   # lssar_score


P = ctypes.POINTER(AttnDesc)
version = _proto("lssar_version", ctypes.c_char_p)().decode()
errmsg = _proto("lssar_errmsg", ctypes.c_char_p)
strerror = _proto("lssar_strerror", ctypes.c_char_p, c_int)
attn_parse = _proto("lssar_attn_parse", c_int, ctypes.c_char_p, ctypes.POINTER(c_int))
attn_name = _proto("lssar_attn_name", ctypes.c_char_p, c_int)
attn_stages_of = _proto("lssar_attn_stages_of", c_int, c_int, ctypes.POINTER(AttnStages))
len_norm_parse = _proto("lssar_len_norm_parse", c_int, ctypes.c_char_p, ctypes.POINTER(c_int))
attn_forward = _proto("lssar_attn_forward", c_int, P, c_int, c_int, c_int, c_int, c_void_p, c_void_p, c_void_p, c_void_p)
attn_backward = _proto("lssar_attn_backward", c_int, P, c_int, c_int, c_int, c_int, c_void_p, c_void_p, c_void_p,
                       c_void_p, c_void_p, c_void_p, c_void_p, c_void_p)
cuda_workspace_size = _proto("lssar_attn_cuda_workspace_size", c_size_t, P, c_int, c_int, c_int, c_int, c_int)
attn_forward_cuda = _proto("lssar_attn_forward_cuda", c_int, P, c_int, c_int, c_int, c_int, c_int, c_void_p, c_void_p,
                           c_void_p, c_void_p, c_void_p, c_void_p)
attn_backward_cuda = _proto("lssar_attn_backward_cuda", c_int, P, c_int, c_int, c_int, c_int, c_int, c_void_p, c_void_p,
                            c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p)
cuda_device_count = _proto("lssar_cuda_device_count", c_int)

F32, BF16 = 0, 1   # lssar_dtype


def check(rc, what):
    """Raise Error with the library's message when rc is not 0."""
    if rc != 0:
        msg = errmsg().decode(errors="replace") or strerror(rc).decode(errors="replace")
        raise Error("%s: %s" % (what, msg))


def parse_kind(name):
    out = c_int()
    check(attn_parse(str(name).encode(), ctypes.byref(out)), "kind %r" % (name,))
    return out.value


def stages(kind):
    """The stages of a kind name (or id): an AttnStages."""
    st = AttnStages()
    check(attn_stages_of(parse_kind(kind) if isinstance(kind, str) else int(kind), ctypes.byref(st)),
          "kind %r" % (kind,))
    return st


def parse_len_norm(name):
    out = c_int()
    check(len_norm_parse(str(name).encode(), ctypes.byref(out)), "len_norm %r" % (name,))
    return out.value
