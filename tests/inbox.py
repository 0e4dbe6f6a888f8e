"""What a GUI-side test client receives: tests wait on it, never sleep."""
from __future__ import annotations

import threading
from typing import Callable

from tensorscope.common.events import Message, PausedAt

TIMEOUT = 120.0


class Inbox:
    """Collects messages from a Connection's reader thread."""

    def __init__(self) -> None:
        self.msgs: list[Message] = []
        self.closed: str | None = None
        self.cond = threading.Condition()

    def on_message(self, msg: Message) -> None:
        with self.cond:
            self.msgs.append(msg)
            self.cond.notify_all()

    def on_closed(self, reason: str) -> None:
        with self.cond:
            self.closed = reason
            self.cond.notify_all()

    def wait(self, pred: Callable[[list[Message]], bool], what: str,
             timeout: float = TIMEOUT) -> None:
        """Wait until ``pred(messages)`` holds; fail naming ``what`` otherwise."""
        with self.cond:
            ok = self.cond.wait_for(lambda: pred(self.msgs), timeout)
        assert ok, f"timed out waiting for {what}; got {[m.TYPE for m in self.msgs]}"

    def of(self, cls: type) -> list:
        """The messages of class ``cls`` so far."""
        with self.cond:
            return [m for m in self.msgs if isinstance(m, cls)]

    def first(self, cls: type, what: str) -> Message:
        """Wait for the first message of class ``cls``."""
        self.wait(lambda ms: any(isinstance(m, cls) for m in ms), what)
        return self.of(cls)[0]

    def pause(self, n: int) -> PausedAt:
        """Wait for the ``n``-th pause (1-based)."""
        self.wait(lambda ms: sum(isinstance(m, PausedAt) for m in ms) >= n, f"pause #{n}")
        return self.of(PausedAt)[n - 1]
