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
from typing import Callable, Protocol

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

    A sink that raises is switched off (removed, never closed) and reported
    once through ``on_sink_failed`` (default: one line on stderr), after the
    message has reached the other sinks: a broken sink never breaks training
    and never costs the others a message.
    """

    def __init__(self, on_sink_failed: Callable[[Sink, Exception], None] | None = None) -> None:
        # replaced, never changed in place: ``emit`` walks the list it finds
        self._sinks: list[Sink] = []
        self._on_sink_failed = on_sink_failed or _say_sink_failed
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
            self._sinks = [*self._sinks, sink]

    def remove_sink(self, sink: Sink) -> None:
        """Detach a sink without closing it."""
        with self._lock:
            if sink in self._sinks:
                self._sinks = [k for k in self._sinks if k is not sink]

    def emit(self, msg: Message) -> None:
        """Number ``msg`` and pass it to every sink."""
        msg.seq = next(self._seq)
        failed: list[tuple[Sink, Exception]] | None = None
        for sink in self._sinks:
            try:
                sink.handle(msg)
            except Exception as exc:  # a sink must never break training
                self.remove_sink(sink)
                failed = [*(failed or []), (sink, exc)]
        if failed:
            for broken, error in failed:
                try:
                    self._on_sink_failed(broken, error)
                except Exception:
                    _say_sink_failed(broken, error)

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


def _say_sink_failed(sink: Sink, exc: Exception) -> None:
    print(f"tensorscope: {type(sink).__name__} failed and was detached: "
          f"{type(exc).__name__}: {exc}", file=sys.stderr)
