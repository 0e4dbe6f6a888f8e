"""The training side's sending thread: a bounded queue that never blocks training.

``Sender.put`` runs on the training thread and returns at once. A named daemon
thread encodes and writes. When the GUI reads slower than training produces,
call digests beyond ``max_digests`` queued are dropped (they are the bulk and
are repeated every step); findings, exceptions, control messages, responses,
summaries and graphs are never dropped. The number dropped rides on the next
``StepSummary`` (a copy: the original object is shared with other sinks) and
is also announced by a ``Dropped`` event.

If the GUI stops reading altogether, essential messages pile up to
``max_essential``; then the connection is declared stuck and closed (training
carries on). If the GUI dies, the write fails and the sender stops quietly.
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import threading
from typing import Callable, Iterable

from tensorscope.common.events import CallDigest, Dropped, Message, StepSummary
from tensorscope.common.protocol import encode
from tensorscope.common.transport import Channel

log = logging.getLogger("tensorscope.sender")

DROPPABLE = (CallDigest,)
WAKE_EVERY = 256  # queued digests that wake the sending thread
IDLE_FLUSH = 0.2  # seconds after which lone digests are sent anyway


class Sender:
    """Streams messages to one channel from a daemon thread."""

    def __init__(self, channel: Channel, *, max_digests: int = 4096,
                 max_essential: int = 100_000, name: str = "tensorscope-sender",
                 on_stopped: Callable[[str], None] | None = None) -> None:
        self.channel = channel
        self.max_digests = max_digests
        self.max_essential = max_essential
        self.dropped_total = 0
        self._dropped = 0
        self._digests = 0
        self._queue: collections.deque[Message] = collections.deque()
        self._cond = threading.Condition()
        self._stopping = False
        self._busy = False
        self._on_stopped = on_stopped
        self.stopped_reason: str | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the sending thread."""
        self._thread.start()

    @property
    def alive(self) -> bool:
        """False once the connection failed or the sender was closed."""
        return self.stopped_reason is None and not self._stopping

    def put(self, msg: Message) -> None:
        """Queue ``msg`` (training thread; never blocks)."""
        with self._cond:
            if not self.alive:
                return
            if isinstance(msg, DROPPABLE):
                if self._digests >= self.max_digests:
                    self._dropped += 1
                    self.dropped_total += 1
                    return
                self._digests += 1
            elif isinstance(msg, StepSummary) and self._dropped:
                self._queue.append(Dropped(seq=msg.seq, count=self._dropped))
                msg = dataclasses.replace(msg, dropped=msg.dropped + self._dropped)
                self._dropped = 0
            self._queue.append(msg)
            if len(self._queue) - self._digests > self.max_essential:
                self._fail_locked("the GUI stopped reading; disconnected it")
            # Wake the sending thread once per burst, not per digest: every wake-up
            # costs the training thread GIL hand-offs inside its torch calls.
            if not isinstance(msg, DROPPABLE) or self._digests >= WAKE_EVERY:
                self._cond.notify()

    def put_many(self, msgs: Iterable[Message]) -> None:
        """Queue several messages in order."""
        for msg in msgs:
            self.put(msg)

    def _take(self) -> list[Message] | None:
        with self._cond:
            while self.stopped_reason is None and not self._stopping:
                if self._queue and (self._digests >= WAKE_EVERY
                                    or len(self._queue) > self._digests):
                    break  # a burst, or an essential message, is waiting
                if not self._cond.wait(IDLE_FLUSH) and self._queue:
                    break  # a few digests and nothing else for a while: send them
            if self.stopped_reason is not None or not self._queue:
                return None
            batch = []
            while self._queue and len(batch) < 512:
                msg = self._queue.popleft()
                if isinstance(msg, DROPPABLE):
                    self._digests -= 1
                batch.append(msg)
            self._busy = True
            return batch

    def _run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                break
            try:
                self.channel.send_bytes(b"".join(encode(m) for m in batch))
            except OSError as exc:
                with self._cond:
                    self._fail_locked(f"the GUI went away ({exc})")
                break
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()
        if self._on_stopped is not None:
            self._on_stopped(self.stopped_reason or "closed")

    def _fail_locked(self, reason: str) -> None:
        if self.stopped_reason is None:
            self.stopped_reason = reason
            log.warning("stopped streaming to %s: %s", self.channel.peer, reason)
            self._queue.clear()
            self._digests = 0
            self.channel.close()
            self._cond.notify_all()

    def flush(self, timeout: float = 2.0) -> bool:
        """Wait until the queue is empty (or the sender stopped); True if drained."""
        with self._cond:
            return self._cond.wait_for(
                lambda: (not self._queue and not self._busy) or self.stopped_reason is not None, timeout)

    def close(self, timeout: float = 2.0) -> None:
        """Send what is queued (up to ``timeout``), then stop the thread."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)
        if self._thread.is_alive():
            with self._cond:
                self._fail_locked("timed out flushing to the GUI")
            self._thread.join(1.0)
