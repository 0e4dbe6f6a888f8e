"""The training side's sending thread: bounded queues that never block training.

``Sender.put`` runs on the training thread and returns at once. A named daemon
thread encodes and writes. What a GUI that reads slower than training loses
is decided per kind of message, by its class's ``droppable`` and ``queued``
(``tensorscope.common.events``):

* a step's calls (``StepCalls``, or the per-call ``CallDigest`` of a replayed
  older stream: the bulk, repeated every step) beyond ``max_digests`` queued
  are dropped; the number dropped rides on the next ``StepSummary`` (a copy:
  the original object is shared with other sinks) and in a ``Dropped`` event;
* step summaries, step starts and logged scalars are kept in a ring (``STREAM_RING``): only a GUI
  that stalls for longer than the ring lasts loses the oldest of them;
* exceptions and responses are kept in smaller rings;
* findings, pause state, graphs and ``Dropped`` counts coalesce once the
  queue is congested: a newer one replaces the unsent older one of its key;
* everything else (hello, module tree, bye) is kept, up to ``max_other``.

So memory stays bounded however long the GUI stalls. A GUI that accepts no
byte for ``stall_timeout`` seconds is given up on: the connection is closed
and stderr says so (training carries on; in connect mode the live links look
for a GUI again). A failure of the sending thread itself closes the
connection and says so too: the sender never dies while claiming to be alive.
"""
from __future__ import annotations

import collections
import dataclasses
import logging
import socket
import struct
import sys
import threading
from typing import Any, Callable, Iterable

from tensorscope.common.events import Dropped, Message, StepSummary
from tensorscope.common.protocol import encode
from tensorscope.common.transport import Channel

log = logging.getLogger("tensorscope.sender")

WAKE_EVERY = 256  # queued digests that wake the sending thread
IDLE_FLUSH = 0.2  # seconds after which lone digests are sent anyway
CONGESTED = 1024  # queued messages beyond which coalescing messages coalesce
STALL_TIMEOUT = 120.0  # seconds without a byte accepted before the GUI is given up on


def _set_send_timeout(sock: socket.socket, seconds: float) -> None:
    """Make a blocking ``send`` give up after ``seconds`` (receives are unaffected)."""
    try:
        whole = int(seconds)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                        struct.pack("ll", whole, int((seconds - whole) * 1e6)))
    except (OSError, AttributeError, struct.error):  # not on this platform: no stall limit
        log.debug("SO_SNDTIMEO unavailable; a stalled GUI is not given up on")


class Sender:
    """Streams messages to one channel from a daemon thread."""

    def __init__(self, channel: Channel, *, max_digests: int = 4096, max_other: int = 10_000,
                 stall_timeout: float = STALL_TIMEOUT, name: str = "tensorscope-sender",
                 on_stopped: Callable[[str], None] | None = None) -> None:
        self.channel = channel
        self.max_digests = max_digests
        self.max_other = max_other
        self.stall_timeout = stall_timeout
        self.dropped_total = 0  # digests dropped
        self.lost: collections.Counter[str] = collections.Counter()  # others, by ring/key kind
        self._dropped = 0  # digests dropped since the last summary
        self._digests = 0  # digests queued
        self._others = 0  # "keep" messages queued
        # Items are messages, or one-element lists (slots) for messages that may be
        # superseded while queued; a superseded slot holds None until it is popped.
        self._queue: collections.deque[Any] = collections.deque()
        self._live = 0  # queued items that will be sent
        self._dead = 0  # superseded slots still in the queue
        self._rings: dict[str, collections.deque[list]] = {}
        self._latest: dict[tuple, list] = {}
        self._cond = threading.Condition()
        self._stopping = False
        self._busy = False
        self._on_stopped = on_stopped
        self.stopped_reason: str | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        """Start the sending thread."""
        sock = getattr(self.channel, "sock", None)  # a test's stand-in channel has none
        if sock is not None:
            _set_send_timeout(sock, self.stall_timeout)
        self._thread.start()

    @property
    def alive(self) -> bool:
        """False once the connection failed or the sender was closed."""
        return self.stopped_reason is None and not self._stopping

    @property
    def queued(self) -> int:
        """Messages waiting to be sent."""
        return self._live

    # ------------------------------------------------- training thread ---
    def put(self, msg: Message) -> None:
        """Queue ``msg`` (training thread; never blocks)."""
        with self._cond:
            if not self.alive:
                return
            if msg.droppable:
                if self._digests >= self.max_digests:
                    self._dropped += 1
                    self.dropped_total += 1
                    return
                self._digests += 1
                self._queue.append(msg)
                self._live += 1
                if self._digests >= WAKE_EVERY:
                    # Wake the sending thread once per burst, not per digest: every wake-up
                    # costs the training thread GIL hand-offs inside its torch calls.
                    self._cond.notify()
                return
            if isinstance(msg, StepSummary) and self._dropped:
                self._put_locked(Dropped(seq=msg.seq, count=self._dropped))
                msg = dataclasses.replace(msg, dropped=msg.dropped + self._dropped)
                self._dropped = 0
            self._put_locked(msg)
            self._cond.notify()

    def _put_locked(self, msg: Message) -> None:
        policy = msg.queued
        if policy is None:
            if self._others >= self.max_other:
                self._fail_locked(f"the GUI stopped reading ({self.max_other} messages "
                                  f"waiting); disconnected it")
                return
            self._others += 1
            self._queue.append(msg)
            self._live += 1
            return
        slot = [msg]
        if policy.how == "ring":
            ring = self._rings.get(policy.name)
            if ring is None:
                ring = self._rings[policy.name] = collections.deque()
            if len(ring) >= policy.size:
                self._supersede(ring.popleft(), policy.name)
            ring.append(slot)
        elif self._live >= CONGESTED:
            key = msg.slot()
            old = self._latest.get(key)
            if old is not None and old[0] is not None:
                if isinstance(msg, Dropped):
                    msg.count += old[0].count
                self._supersede(old, policy.name)
            self._latest[key] = slot
        self._queue.append(slot)
        self._live += 1

    def _supersede(self, slot: list, what: str) -> None:
        if slot[0] is None:
            return  # already sent
        slot[0] = None
        self._live -= 1
        self._dead += 1
        self.lost[what] += 1
        if self._dead > 4096 and self._dead > self._live:  # compact now and then
            self._queue = collections.deque(
                item for item in self._queue if not (isinstance(item, list) and item[0] is None))
            self._dead = 0

    def put_many(self, msgs: Iterable[Message]) -> None:
        """Queue several messages in order."""
        for msg in msgs:
            self.put(msg)

    # -------------------------------------------------- sending thread ---
    def _take(self) -> list[Message] | None:
        with self._cond:
            while self.stopped_reason is None and not self._stopping:
                if self._live and (self._digests >= WAKE_EVERY or self._live > self._digests):
                    break  # a burst, or an essential message, is waiting
                if not self._cond.wait(IDLE_FLUSH) and self._live:
                    break  # a few digests and nothing else for a while: send them
            if self.stopped_reason is not None or not self._live:
                return None
            batch: list[Message] = []
            while self._queue and len(batch) < 512:
                item = self._queue.popleft()
                if isinstance(item, list):
                    msg = item[0]
                    if msg is None:
                        self._dead -= 1
                        continue
                    item[0] = None  # sent: a ring or a newer message no longer counts it
                else:
                    msg = item
                    if msg.droppable:
                        self._digests -= 1
                    else:
                        self._others -= 1
                self._live -= 1
                batch.append(msg)
            self._busy = True
            return batch

    def _run(self) -> None:
        try:
            while True:
                batch = self._take()
                if batch is None:
                    break
                try:
                    self.channel.send_bytes(b"".join(encode(m) for m in batch))
                except (BlockingIOError, socket.timeout):
                    with self._cond:
                        self._fail_locked(f"the GUI accepted nothing for "
                                          f"{self.stall_timeout:g} s; disconnected it")
                    break
                except OSError as exc:
                    with self._cond:
                        self._fail_locked(f"the GUI went away ({exc})", quiet=True)
                    break
                finally:
                    with self._cond:
                        self._busy = False
                        self._cond.notify_all()
        except Exception as exc:  # a bug here must not leave a sender that looks alive
            with self._cond:
                self._fail_locked(f"the sending thread failed ({type(exc).__name__}: {exc}); "
                                  f"disconnected the GUI")
        with self._cond:
            self._cond.notify_all()
        if self._on_stopped is not None:
            self._on_stopped(self.stopped_reason or "closed")

    def _fail_locked(self, reason: str, quiet: bool = False) -> None:
        if self.stopped_reason is None:
            self.stopped_reason = reason
            if quiet:
                log.info("stopped streaming to %s: %s", self.channel.peer, reason)
            else:
                print(f"tensorscope: stopped streaming to the GUI at {self.channel.peer}: "
                      f"{reason}; training continues", file=sys.stderr)
            self._queue.clear()
            self._rings.clear()
            self._latest.clear()
            self._live = self._dead = self._digests = self._others = 0
            self.channel.close()
            self._cond.notify_all()

    # ------------------------------------------------------ any thread ---
    def flush(self, timeout: float = 2.0) -> bool:
        """Wait until the queue is empty (or the sender stopped); True if drained."""
        with self._cond:
            return self._cond.wait_for(
                lambda: (not self._live and not self._busy) or self.stopped_reason is not None,
                timeout)

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
