"""Whether the script uses a ``GradScaler`` (automatic mixed precision).

With a GradScaler, float16 gradients that overflow to Inf are expected: the
scaler skips that optimizer step and lowers its scale. The check walks the
garbage collector's objects once, only when a float16 gradient overflowed
(rare), and the answer is kept for a while.
"""
from __future__ import annotations

import gc
import time
import warnings

import torch

_CACHE: dict[str, float | bool] = {"at": -1e9, "value": False}
_TTL = 30.0


def _scaler_types() -> tuple[type, ...]:
    types: list[type] = []
    amp = getattr(torch, "amp", None)
    for owner in (amp, getattr(torch.cuda, "amp", None)):
        cls = getattr(owner, "GradScaler", None) if owner is not None else None
        if isinstance(cls, type):
            types.append(cls)
    return tuple(types)


def grad_scaler_in_use() -> bool:
    """True if a ``GradScaler`` object exists in the process (cached for 30 s)."""
    now = time.monotonic()
    if now - float(_CACHE["at"]) < _TTL:
        return bool(_CACHE["value"])
    types = _scaler_types()
    with warnings.catch_warnings():   # isinstance on some objects warns (deprecated aliases)
        warnings.simplefilter("ignore")
        found = bool(types) and any(_is_a(o, types) for o in gc.get_objects())
    _CACHE["at"], _CACHE["value"] = now, found
    return found


def _is_a(obj: object, types: tuple[type, ...]) -> bool:
    """``isinstance``, False for a ``weakref.proxy`` whose referent is gone (the
    collector still lists it; ``isinstance`` on it raises ReferenceError)."""
    try:
        return isinstance(obj, types)
    except ReferenceError:
        return False
