"""Copies of a watched model carry no TensorScope.

``watch(model)`` registers the capture's bound methods as forward hooks on
each of the model's modules. ``copy.deepcopy(model)`` (an EMA model, a
best-model snapshot, a teacher made from the student) and ``torch.save(model)``
copy those hook dicts, and with them would copy or pickle the whole capture:
its locks, sockets and SQLite connection, which fails in the user's script.
So the capture copies and pickles as ``INERT``, whose hooks do nothing: the
copy behaves exactly as the model would without TensorScope and is not
watched (pass it to ``watch`` to watch it). A deep copy of a bound method
binds the same function to the copy of its object, so the copy's hooks are
``Capture``'s own, bound to ``INERT``: they return at their first check,
``self.active``, which is False here. A pickle of a bound method is
``getattr(object, name)``, so an unpickled copy calls ``INERT``'s methods. A model unpickled from such a
file finds ``tensorscope`` on import, as any pickled hook needs its module.
"""
from __future__ import annotations

from typing import Any


class InertHooks:
    """Stands in for the capture in a copy of a watched module: every hook returns None."""

    #: what ``Capture``'s hooks check first (and return at when False)
    active = False

    def forward_pre(self, *args: Any, **kwargs: Any) -> None:
        """The copy's forward pre-hook: inputs unchanged."""
        return None

    def forward(self, *args: Any, **kwargs: Any) -> None:
        """The copy's forward hook: output unchanged."""
        return None

    def __reduce__(self) -> tuple[Any, tuple]:
        return inert, ()

    def __deepcopy__(self, memo: dict) -> "InertHooks":
        return self


def inert() -> InertHooks:
    """The one ``InertHooks`` (what a pickled capture loads as)."""
    return INERT


INERT = InertHooks()
