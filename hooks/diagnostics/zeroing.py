"""Who calls ``zero_grad()``, and when: the calls of ``Optimizer.zero_grad`` and
``Module.zero_grad`` while a diagnostic listens (training thread).

Both methods are wrapped on their base classes (``torch.optim.Optimizer``,
``torch.nn.Module``) while at least one listener is registered, and put back
when the last one leaves; subclasses that do not override them go through
the wrapper. A class-level wrapper, unlike one set on each instance, is never
copied by ``copy.deepcopy(model)`` (a target network's ``zero_grad`` must not
clear the online network's gradients). The wrapper calls the original first,
then each listener with ``(obj, set_to_none)``; a listener that raises is
dropped and said once, so ``zero_grad`` itself never fails because of it.
Nothing here reads a tensor.
"""
from __future__ import annotations

import functools
import sys
from typing import Any, Callable

import torch
from torch import nn

from tensorscope.hooks.compiled import is_compiling

#: ``listener(obj, set_to_none)``: ``obj`` is the optimizer or module zeroed
Listener = Callable[[Any, bool], None]

_TARGETS: tuple[type, ...] = (torch.optim.Optimizer, nn.Module)
_listeners: list[Listener] = []
_originals: dict[type, tuple[Callable[..., Any], Callable[..., Any]]] = {}


def _wrap(cls: type) -> None:
    orig = cls.__dict__.get("zero_grad")
    if orig is None or getattr(orig, "__tensorscope_wrapped__", False):
        return

    @functools.wraps(orig)
    def zero_grad(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = orig(self, *args, **kwargs)
        if _listeners and not is_compiling():
            set_to_none = args[0] if args else kwargs.get("set_to_none", True)
            _notify(self, bool(set_to_none))
        return out

    zero_grad.__tensorscope_wrapped__ = True  # type: ignore[attr-defined]
    setattr(cls, "zero_grad", zero_grad)
    _originals[cls] = (orig, zero_grad)


def _notify(obj: Any, set_to_none: bool) -> None:
    for fn in list(_listeners):
        try:
            fn(obj, set_to_none)
        except Exception as exc:   # never break the user's zero_grad()
            if fn in _listeners:
                _listeners.remove(fn)
            print(f"tensorscope: the zero_grad() check failed ({type(exc).__name__}: {exc}); "
                  f"it is off for the rest of the run", file=sys.stderr)
    if not _listeners:
        _unwrap()


def _unwrap() -> None:
    for cls, (orig, wrapper) in list(_originals.items()):
        if cls.__dict__.get("zero_grad") is wrapper:
            setattr(cls, "zero_grad", orig)
        del _originals[cls]


def listen(fn: Listener) -> None:
    """Call ``fn(obj, set_to_none)`` after every ``zero_grad()`` from now on."""
    if fn not in _listeners:
        _listeners.append(fn)
    for cls in _TARGETS:
        _wrap(cls)


def unlisten(fn: Listener) -> None:
    """Stop calling ``fn``; the originals are back once no listener is left."""
    if fn in _listeners:
        _listeners.remove(fn)
    if not _listeners:
        _unwrap()


class ZeroGradListening:
    """A listener as a handle: listens from construction until ``remove()`` (which
    a watch calls with its other handles when it closes)."""

    def __init__(self, fn: Listener) -> None:
        self.fn: Listener | None = fn
        listen(fn)

    def remove(self) -> None:
        """Stop listening (idempotent)."""
        if self.fn is not None:
            unlisten(self.fn)
            self.fn = None
