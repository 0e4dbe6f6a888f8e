"""Tensors that are not plain strided ones: what of them the capture can take.

The hooks take plain tensors on a fast path that assumes a strided layout,
a dtype with reductions, and real storage. Everything else reaches this
module, once per tensor, from the fast path's ``except`` (or because its
type is a ``torch.Tensor`` subclass):

| kind | metadata | values the statistics are taken of |
|---|---|---|
| ``meta`` | shape, dtype, device | none (no data) |
| ``sparse_coo``, ``sparse_csr``/``csc``/``bsr``/``bsc`` | plus ``layout``, ``nnz`` | the stored values |
| ``float8`` (e4m3fn, e5m2, ...) | as plain | an on-device float32 upcast |
| ``quantized`` | plus ``layout`` | the dequantized values (on device) |
| ``nested`` | ``components`` (each one's shape), ``layout`` | a jagged tensor's packed values; none for a strided one |
| ``subclass`` | as plain, ``subclass`` | the plain tensor under it (see below) |
| ``parameter`` | as plain | itself |

A subclass's statistics are those of the plain tensor under it when it has no
``__torch_dispatch__`` (its ``__torch_function__`` never sees the capture's
reads); one with ``__torch_dispatch__`` gets metadata only.

A kind the capture cannot take fully is named once per process on stderr
(``note``). Nothing here ever changes the user's tensor: views and upcasts
are new tensors, freed when the hook returns.
"""
from __future__ import annotations

import math
import sys
from typing import Any

import torch

from tensorscope.hooks.flatten import _FLOAT8, dtype_name, tensor_fields

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_SPARSE = {torch.sparse_coo: "sparse_coo", torch.sparse_csr: "sparse_csr",
           torch.sparse_csc: "sparse_csc", torch.sparse_bsr: "sparse_bsr",
           torch.sparse_bsc: "sparse_bsc"}
#: at most this many component shapes are listed for a nested tensor
MAX_COMPONENTS = 64

#: what the capture takes of each kind, said once on stderr
_NOTES = {
    "meta": "a meta-device tensor has no values: metadata only",
    "sparse": "statistics are of the stored values (nnz of them)",
    "float8": "statistics are taken of an on-device float32 upcast",
    "quantized": "statistics are taken of the dequantized values",
    "nested": "metadata lists each component's shape; statistics of a jagged tensor's "
              "packed values, none for a strided nested tensor",
    "subclass": "statistics of the plain tensor under it when it has no "
                "__torch_dispatch__; metadata only otherwise",
}
_noted: set[str] = set()


def kind_of(t: _Tensor) -> str:
    """``plain``, ``parameter``, ``meta``, ``sparse_*``, ``float8``, ``quantized``,
    ``nested`` or ``subclass``."""
    if t.is_nested:
        return "nested"
    layout = t.layout
    if layout in _SPARSE:
        return _SPARSE[layout]
    if t.is_meta:
        return "meta"
    if t.is_quantized:
        return "quantized"
    if t.dtype in _FLOAT8:
        return "float8"
    cls = type(t)
    if cls is _Tensor:
        return "plain"
    if cls is torch.nn.Parameter:
        return "parameter"
    return "subclass"


def has_subclass(values: Any) -> bool:
    """Whether ``values`` hold a tensor of a subclass other than ``Parameter`` (its
    ``__torch_function__`` would see what TensorScope reads: read under
    ``torch._C.DisableTorchFunctionSubclass``)."""
    for v in values:
        cls = type(v)
        if cls is not _Tensor and cls is not _Parameter and isinstance(v, _Tensor):
            return True
    return False


def note(kind: str, where: str) -> None:
    """Say once per process what the capture takes of tensors of ``kind``."""
    group = "sparse" if kind.startswith("sparse") else kind
    text = _NOTES.get(group)
    if text is None or group in _noted:
        return
    _noted.add(group)
    print(f"tensorscope: note: {kind} tensor ({where}): {text}", file=sys.stderr)


def _plain_under(t: _Tensor) -> _Tensor | None:
    """The plain tensor under a subclass without ``__torch_dispatch__`` (same storage)."""
    cls = type(t)
    if getattr(cls, "__torch_dispatch__", None) is not _Tensor.__torch_dispatch__:
        return None  # a wrapper subclass: its values are whatever its dispatch says
    with torch._C.DisableTorchFunctionSubclass():
        return t.as_subclass(_Tensor)


def values_view(t: _Tensor, kind: str) -> _Tensor | None:
    """A plain strided tensor (on ``t``'s device) whose statistics stand for ``t``'s,
    or None when there are none to take. Grad mode should be off."""
    if kind in ("plain",):
        return t
    if kind == "parameter":
        return t.detach()
    if kind == "meta":
        return None
    if kind == "sparse_coo":
        return t.detach()._values()
    if kind.startswith("sparse_"):
        return t.detach().values()
    if kind == "float8":
        return t.detach().to(torch.float32)
    if kind == "quantized":
        return t.detach().dequantize()
    if kind == "nested":
        if t.layout == torch.jagged:
            packed = t.detach().values()
            return packed if type(packed) is _Tensor else None
        return None
    if kind == "subclass":
        inner = _plain_under(t)
        if inner is None or inner.is_meta or inner.layout != torch.strided:
            return None
        return inner.detach()
    return None


def _int(size: Any) -> int:
    """A size that may be symbolic (a jagged dimension) as an int, -1 if unknown."""
    try:
        return int(size)
    except Exception:
        return -1


def describe(path: str, t: _Tensor, kind: str) -> dict[str, Any]:
    """TensorMeta of a non-plain tensor: the plain fields, plus ``layout``, ``nnz``,
    ``components`` or ``subclass`` where they apply."""
    if kind == "nested":
        return _nested_meta(path, t)
    try:
        base = tensor_fields(path, t)
    except Exception:   # a wrapper subclass without strides, or symbolic sizes
        n = _int(t.numel())
        base = {"path": path, "kind": "tensor", "shape": [_int(s) for s in t.shape],
                "dtype": dtype_name(t.dtype), "device": str(t.device),
                "requires_grad": t.requires_grad, "contiguous": False, "numel": n,
                "bytes": n * t.element_size()}
    if kind.startswith("sparse_"):
        base["layout"] = kind
        nnz = _int(t._nnz())
        base["nnz"] = nnz
        base["bytes"] = nnz * t.element_size()
        base["contiguous"] = False
    elif kind == "quantized":
        base["layout"] = "quantized"
    elif kind == "subclass":
        base["subclass"] = type(t).__name__
    return base


def _nested_meta(path: str, t: _Tensor) -> dict[str, Any]:
    parts = t.unbind()
    shapes = [[_int(s) for s in p.shape] for p in parts[:MAX_COMPONENTS]]
    n = sum(math.prod(s) for s in shapes) if len(parts) <= MAX_COMPONENTS else _int(t.numel())
    dims = len(shapes[0]) if shapes else 0
    common = [len(parts)] + [
        shapes[0][d] if all(len(s) == dims and s[d] == shapes[0][d] for s in shapes) else -1
        for d in range(dims)]
    layout = "jagged" if t.layout == torch.jagged else "strided"
    return {"path": path, "kind": "tensor", "shape": common, "dtype": dtype_name(t.dtype),
            "device": str(t.device), "requires_grad": t.requires_grad, "contiguous": False,
            "numel": n, "bytes": n * t.element_size(), "layout": f"nested_{layout}",
            "components": shapes}
