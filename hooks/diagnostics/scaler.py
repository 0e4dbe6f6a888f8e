"""Whether the script uses a ``GradScaler`` (automatic mixed precision).

With a GradScaler, float16 gradients that overflow to Inf are expected: the
scaler skips that optimizer step and lowers its scale. The check walks the
garbage collector's objects once, only when a float16 gradient overflowed
(rare), and the answer is kept for a while, within one watch session: each
session starts with ``forget()`` (an earlier script run in the same process, such
as the gallery runner's, may have had one). A scaler built with ``enabled=False``
skips nothing and does not count.
"""
from __future__ import annotations

import gc
import time
import weakref
from typing import Any

import torch

from tensorscope.hooks.warning_filters import warnings_ignored

_LIVE: dict[str, Any] = {"at": -1e9, "refs": []}
_TTL = 30.0


def _scaler_types() -> tuple[type, ...]:
    types: list[type] = []
    amp = getattr(torch, "amp", None)
    for owner in (amp, getattr(torch.cuda, "amp", None)):
        cls = getattr(owner, "GradScaler", None) if owner is not None else None
        if isinstance(cls, type):
            types.append(cls)
    return tuple(types)


def forget() -> None:
    """Drop what is known of the process's scalers (a new session: its script may
    use another scaler, or none)."""
    _LIVE["at"], _LIVE["refs"] = -1e9, []


def grad_scaler_in_use() -> bool:
    """True if an enabled ``GradScaler`` is alive in the process (``live_scalers``)."""
    return bool(live_scalers())


def _is_a(obj: object, types: tuple[type, ...]) -> bool:
    """An enabled scaler of ``types``: ``isinstance``, False for a ``weakref.proxy``
    whose referent is gone (the collector still lists it; ``isinstance`` on it raises
    ReferenceError) and for a scaler built with ``enabled=False``."""
    try:
        if not isinstance(obj, types):
            return False
    except ReferenceError:
        return False
    try:   # enabled=False: scale() returns the loss as it is, step() never skips
        return bool(obj.is_enabled())  # type: ignore[attr-defined]
    except Exception:   # an odd subclass: count it, as before
        return True


def live_scalers() -> list[Any]:
    """The enabled ``GradScaler`` objects of the process that are still alive: one
    walk of the collector's objects per 30 s (``_is_a``), weak references in
    between."""
    now = time.monotonic()
    if now - float(_LIVE["at"]) >= _TTL:
        types = _scaler_types()
        with warnings_ignored():   # not catch_warnings: it re-shows the script's warnings
            found = [o for o in gc.get_objects() if _is_a(o, types)] if types else []
        _LIVE["at"], _LIVE["refs"] = now, [weakref.ref(o) for o in found]
    return [s for s in (ref() for ref in _LIVE["refs"]) if s is not None]


def unscaled_for(scaler: Any, optimizer: Any) -> bool | None:
    """Whether ``scaler`` has unscaled ``optimizer``'s gradients this iteration
    (``scaler.unscale_``, or ``scaler.step`` on its way in); None when the scaler
    holds no state for it (not unscaled, or not driven by this scaler)."""
    states = getattr(scaler, "_per_optimizer_states", None)
    if not isinstance(states, dict) or id(optimizer) not in states:
        return None
    stage = states[id(optimizer)].get("stage")
    return getattr(stage, "name", "") in ("UNSCALED", "STEPPED")
