"""A tiny observer list: ``state.events.<name>.connect(callback)`` (napari-style).

No Qt here, so the inspector's state can be driven and observed in plain
Python; the widget subscribes to these emitters on the GUI thread.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Event:
    """What an emitter passes to its callbacks: the event's name and new value."""

    type: str
    value: Any = None


Callback = Callable[[Event], None]


class EventEmitter:
    """An ordered list of callbacks called with an :class:`Event` on ``emit``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._callbacks: list[Callback] = []

    def connect(self, callback: Callback) -> Callback:
        """Call ``callback(event)`` on every emit; returns it (usable as a decorator)."""
        if callback not in self._callbacks:
            self._callbacks.append(callback)
        return callback

    def disconnect(self, callback: Callback) -> None:
        """Stop calling ``callback``; unknown callbacks are ignored."""
        if callback in self._callbacks:
            self._callbacks.remove(callback)

    def emit(self, value: Any = None) -> None:
        """Call every connected callback in order (exceptions propagate)."""
        event = Event(self.name, value)
        for callback in list(self._callbacks):
            callback(event)


class EmitterGroup:
    """A namespace of named emitters: ``group.selection``, ``group.slice`` ..."""

    def __init__(self, *names: str) -> None:
        self._names = tuple(names)
        for name in names:
            setattr(self, name, EventEmitter(name))

    @property
    def names(self) -> tuple[str, ...]:
        """The names of the emitters in this group."""
        return self._names
