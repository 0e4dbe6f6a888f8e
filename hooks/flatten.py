"""Flatten nested module inputs and outputs into readable paths.

``flatten(((x, None), {"logits": y}), "out")`` gives
``[("out[0][0]", x), ("out[0][1]", None), ('out[1]["logits"]', y)]``.
Tuples, lists, dicts, namedtuples (``out.hidden``) and dataclasses
(``out.loss``) are walked; anything else is a leaf. ``meta`` turns a leaf
into a TensorMeta dict (non-tensors are summarised by type).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import torch

from tensorscope.common.tensors import dtype_name, tensor_meta

MAX_DEPTH = 6
MAX_ITEMS = 64

_Tensor = torch.Tensor


def flatten(obj: Any, prefix: str) -> list[tuple[str, Any]]:
    """Leaves of ``obj`` with their paths (at most ``MAX_ITEMS`` per container)."""
    if type(obj) is _Tensor or isinstance(obj, _Tensor):
        return [(prefix, obj)]
    out: list[tuple[str, Any]] = []
    _walk(obj, prefix, out, 0)
    return out


def flatten_args(args: tuple, kwargs: dict | None) -> list[tuple[str, Any]]:
    """Positional inputs as ``in[i]``, keyword inputs as ``in["name"]``."""
    if len(args) == 1 and not kwargs and isinstance(args[0], _Tensor):
        return [("in[0]", args[0])]
    out: list[tuple[str, Any]] = []
    for i, a in enumerate(args[:MAX_ITEMS]):
        _walk(a, f"in[{i}]", out, 1)
    if kwargs:
        for k, v in list(kwargs.items())[:MAX_ITEMS]:
            _walk(v, f'in["{k}"]', out, 1)
    return out


def _walk(obj: Any, path: str, out: list[tuple[str, Any]], depth: int) -> None:
    if isinstance(obj, _Tensor) or depth >= MAX_DEPTH:
        out.append((path, obj))
    elif isinstance(obj, tuple) and hasattr(obj, "_fields"):  # namedtuple
        for name in obj._fields[:MAX_ITEMS]:
            _walk(getattr(obj, name), f"{path}.{name}", out, depth + 1)
    elif isinstance(obj, (tuple, list)):
        for i, item in enumerate(obj[:MAX_ITEMS]):
            _walk(item, f"{path}[{i}]", out, depth + 1)
    elif isinstance(obj, dict):
        for k, v in list(obj.items())[:MAX_ITEMS]:
            key = f'"{k}"' if isinstance(k, str) else str(k)
            _walk(v, f"{path}[{key}]", out, depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj)[:MAX_ITEMS]:
            _walk(getattr(obj, f.name, None), f"{path}.{f.name}", out, depth + 1)
    else:
        out.append((path, obj))


_DTYPE_NAMES: dict[torch.dtype, str] = {}
_META_CACHE: dict[tuple, dict[str, Any]] = {}
_META_CACHE_MAX = 4096
_generation = [0]


def meta_generation() -> int:
    """Bumped whenever the metadata cache is cleared (cached dicts' ids change)."""
    return _generation[0]


def meta(path: str, value: Any) -> dict[str, Any]:
    """TensorMeta of one leaf: full metadata for tensors, the type otherwise.

    Tensors with the same path, shape, dtype, device and flags share one dict,
    other values one per path and type (the same call sees the same metadata
    step after step): treat it as read-only.
    """
    if isinstance(value, _Tensor):
        key = (path, value.shape, value.dtype, value.device, value.requires_grad,
               value.is_contiguous())
        hit = _META_CACHE.get(key)
        if hit is None:
            if len(_META_CACHE) >= _META_CACHE_MAX:
                _META_CACHE.clear()
                _generation[0] += 1
            hit = _META_CACHE[key] = _tensor_meta(path, value)
        return hit
    key = (path, type(value))  # None, flags, numbers: one dict per path and type too,
    hit = _META_CACHE.get(key)  # so the structure key stays equal step after step
    if hit is None:
        if len(_META_CACHE) >= _META_CACHE_MAX:
            _META_CACHE.clear()
            _generation[0] += 1
        hit = _META_CACHE[key] = (
            tensor_meta(path, kind="none", dtype="NoneType") if value is None
            else tensor_meta(path, kind="object", dtype=type(value).__name__))
    return hit


_ONE_META: dict[int, list[dict[str, Any]]] = {}


def shared_metas(metas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``metas`` itself, or for a single TensorMeta the one list every call with
    that metadata shares (a call's metadata lists live until its step ends: one
    list fewer per call for the garbage collector to walk). Read-only, as the
    dicts are."""
    if len(metas) != 1:
        return metas
    key = id(metas[0])
    hit = _ONE_META.get(key)
    if hit is None:
        if len(_ONE_META) >= _META_CACHE_MAX:
            _ONE_META.clear()
        hit = _ONE_META[key] = metas   # holds the dict: its id cannot be reused meanwhile
    return hit


class NotPlain(TypeError):
    """A tensor the hooks' fast path does not take (``tensor_kinds`` does)."""


_STRIDED = torch.strided
_FLOAT8 = frozenset(getattr(torch, n) for n in (
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu")
    if hasattr(torch, n))


def _tensor_meta(path: str, value: torch.Tensor) -> dict[str, Any]:
    # Checked on a cache miss only: such tensors are never cached, so they take the
    # capture's other path every time (their metadata says what they are).
    if (value.layout is not _STRIDED or value.is_meta or value.is_quantized
            or value.dtype in _FLOAT8):
        raise NotPlain(f"{value.layout} {value.dtype} {value.device} tensor")
    return tensor_fields(path, value)


def tensor_fields(path: str, value: torch.Tensor) -> dict[str, Any]:
    """The TensorMeta fields of a tensor (no cache, no check)."""
    dt = value.dtype
    name = _DTYPE_NAMES.get(dt)
    if name is None:
        name = _DTYPE_NAMES[dt] = dtype_name(dt)
    n = value.numel()
    return {
        "path": path, "kind": "tensor", "shape": list(value.shape), "dtype": name,
        "device": str(value.device), "requires_grad": value.requires_grad,
        "contiguous": value.layout is _STRIDED and value.is_contiguous(), "numel": n,
        "bytes": n * value.element_size(),
    }
