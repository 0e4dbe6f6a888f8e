"""The in-process hub that fans messages out to sinks.

The training side creates one ``Session``; hooks call ``emit`` with events
from ``tensorscope.common.events``. Sinks decide what to do with them: the report
builder keeps a summary, the recorder writes SQLite, the sender streams to a
GUI. ``emit`` runs on the training thread, so a sink's ``handle`` must return
quickly: anything slow goes to the sink's own thread.
"""
from __future__ import annotations

import itertools
import logging
import sys
import threading
from typing import Protocol

from tensorscope.common.events import Message

log = logging.getLogger("tensorscope")


class Sink(Protocol):
    """Receives every message a session emits."""

    def handle(self, msg: Message) -> None:
        """Take one message (training thread; must not block)."""

    def close(self) -> None:
        """Flush and release resources; called once, at session end."""


class Session:
    """Numbers messages and hands each to every sink.

    A sink that raises is removed and the error is printed once on stderr:
    a broken sink never breaks training.
    """

    def __init__(self) -> None:
        self._sinks: list[Sink] = []
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        self.closed = False

    @property
    def sinks(self) -> list[Sink]:
        """The sinks, in the order added."""
        return list(self._sinks)

    def add_sink(self, sink: Sink) -> None:
        """Attach a sink; it sees messages emitted from now on."""
        with self._lock:
            self._sinks.append(sink)

    def remove_sink(self, sink: Sink) -> None:
        """Detach a sink without closing it."""
        with self._lock:
            if sink in self._sinks:
                self._sinks.remove(sink)

    def emit(self, msg: Message) -> None:
        """Number ``msg`` and pass it to every sink."""
        msg.seq = next(self._seq)
        for sink in self._sinks:
            try:
                sink.handle(msg)
            except Exception as exc:  # a sink must never break training
                self.remove_sink(sink)
                print(f"tensorscope: {type(sink).__name__} failed and was "
                      f"detached: {type(exc).__name__}: {exc}", file=sys.stderr)

    def close(self) -> None:
        """Close every sink (idempotent)."""
        if self.closed:
            return
        self.closed = True
        for sink in list(self._sinks):
            try:
                sink.close()
            except Exception as exc:
                print(f"tensorscope: closing {type(sink).__name__} failed: "
                      f"{type(exc).__name__}: {exc}", file=sys.stderr)
