"""The one thread bridge: transport and worker callbacks → GUI-thread signals.

Connection reader threads and layout workers call the ``post_*`` methods;
they append to a queue and wake the GUI thread with one queued signal (only
when the queue was empty, so a flood of messages costs one wake-up, not one
per message). On the GUI thread ``_drain`` hands out batches within a time
budget and continues on a zero-timeout timer, so painting, input and other
timers keep running during a flood. No other object touches Qt from another
thread.

A window that closes calls ``close()``: from then on every ``post_*`` is dropped
(and returns False), a reader waiting for room returns at once, and nothing
queued is delivered. Destroying the bridge closes it first (its ``destroyed``
signal, before its C++ object goes), and the wake-up is emitted under the
lock that ``close`` takes, so no poster ever touches a destroyed Qt object.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Callable

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot

from tensorscope.common.events import Message, Response

DRAIN_BUDGET_S = 0.008
# Messages queued for the GUI before readers wait: ~0.25 s at 20,000 events/s
# (the queue peaks near 1,000 there). A reader further ahead only takes CPU and
# the GIL from the GUI thread while it fills the queue, and every queued
# message is objects a full garbage collection walks: flat out, 100,000 stalled
# the GUI 190-300 ms, 20,000 up to 270-330 ms, 5,000 99-122 ms. It also leaves
# what the window shows further behind the training.
MAX_BACKLOG = 5_000


class Bridge(QObject):
    """Queues cross-thread callbacks; emits them as signals on the GUI thread."""

    messages_arrived = Signal(int, list)        # connection id, [Message, ...]
    response_arrived = Signal(object, object)   # handler(Response) -> None, Response
    connection_closed = Signal(int, str)        # connection id, reason
    layout_finished = Signal(object, object)    # token, result (or Exception)
    connection_opened = Signal(int, object)     # connection id, Connection
    error_reported = Signal(str)                # a worker's message for the user
    _wake = Signal()

    def __init__(self, parent: QObject | None = None, max_backlog: int = MAX_BACKLOG) -> None:
        super().__init__(parent)
        self._queue: deque[tuple[str, Any, Any]] = deque()
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self.max_backlog = max_backlog
        self._pending = False
        self._closed = threading.Event()   # plain Python: set while the QObject dies too
        self.max_queue = 0
        # a plain function, not a method: it runs while the QObject is destroyed
        self.destroyed.connect(_closer(self._lock, self._queue, self._room, self._closed))
        self._wake.connect(self._drain, Qt.ConnectionType.QueuedConnection)
        # The rest of a flood drains on a zero timer, not a re-posted event: in
        # exec() Qt's (glib) dispatcher delivers newly posted events ahead of
        # due timers, so a drain that re-posted itself kept timers (the repaint
        # timer included) waiting for several slices. A timer takes its turn.
        self._resume = QTimer(self)
        self._resume.setSingleShot(True)
        self._resume.setInterval(0)
        self._resume.timeout.connect(self._drain)

    # ------------------------------------------------- any thread (posters) ---
    def _post(self, item: tuple[str, Any, Any]) -> bool:
        with self._lock:
            if self._closed.is_set():
                return False
            self._queue.append(item)
            self.max_queue = max(self.max_queue, len(self._queue))
            if self._pending:
                return True
            self._pending = True
            # under the lock: close() (and destruction) cannot run in between
            self._wake.emit()
        return True

    def post_message(self, conn_id: int, msg: Message) -> bool:
        """A message arrived on connection ``conn_id`` (reader thread).

        When the GUI is ``max_backlog`` messages behind, the reader waits here:
        the socket then fills and the training side's bounded queue drops (and
        counts) digests, as designed, instead of this process growing without
        bound. Never call it from the GUI thread. Returns False (at once, also
        while waiting) once the bridge is closed.
        """
        with self._room:
            while len(self._queue) >= self.max_backlog and not self._closed.is_set():
                self._room.wait(0.5)
        return self._post(("msg", conn_id, msg))

    def post_response(self, handler: Callable[[Response], None], resp: Response) -> bool:
        """A request's response arrived; ``handler`` runs on the GUI thread."""
        return self._post(("resp", handler, resp))

    def post_closed(self, conn_id: int, reason: str) -> bool:
        """Connection ``conn_id`` closed (reader thread)."""
        return self._post(("closed", conn_id, reason))

    def post_layout(self, token: Any, result: Any) -> bool:
        """A layout worker finished (worker thread)."""
        return self._post(("layout", token, result))

    def post_connection(self, conn_id: int, connection: Any) -> bool:
        """A script connected (handshake or attach thread)."""
        return self._post(("conn", conn_id, connection))

    def post_error(self, message: str) -> bool:
        """A worker failed in a way the user should see."""
        return self._post(("error", message, None))

    @property
    def closed(self) -> bool:
        """Whether the bridge takes no more posts (any thread)."""
        return self._closed.is_set()

    def close(self) -> None:
        """Drop what is queued and every later post; wake waiting readers (GUI thread)."""
        _closer(self._lock, self._queue, self._room, self._closed)()

    def message_poster(self, conn_id: int) -> Callable[[Message], Any]:
        """``on_message`` callback for ``Connection.start``."""
        return lambda msg: self.post_message(conn_id, msg)

    def closed_poster(self, conn_id: int) -> Callable[[str], Any]:
        """``on_closed`` callback for ``Connection.start``."""
        return lambda reason: self.post_closed(conn_id, reason)

    # ------------------------------------------------------- GUI thread ---
    @Slot()
    def _drain(self) -> None:
        deadline = time.monotonic() + DRAIN_BUDGET_S
        while True:
            batch = self._take(128)
            if not batch:
                return
            self._dispatch(batch)
            if time.monotonic() > deadline:
                with self._lock:
                    if not self._queue:
                        self._pending = False
                        return
                    self._pending = True   # posters must not wake us: the timer will
                self._resume.start()   # let paint, input and timers run first
                return

    def _take(self, n: int) -> list[tuple[str, Any, Any]]:
        with self._lock:
            batch = [self._queue.popleft() for _ in range(min(n, len(self._queue)))]
            if not batch:
                self._pending = False
            self._room.notify_all()
            return batch

    def _dispatch(self, batch: list[tuple[str, Any, Any]]) -> None:
        if self._closed.is_set():
            return
        run: list[Message] = []
        run_conn = None
        for kind, a, b in batch:
            if kind == "msg" and (run_conn is None or a == run_conn):
                run_conn = a
                run.append(b)
                continue
            if run:
                self.messages_arrived.emit(run_conn, run)
                run, run_conn = [], None
            if kind == "msg":
                run_conn, run = a, [b]
            elif kind == "resp":
                self.response_arrived.emit(a, b)
            elif kind == "closed":
                self.connection_closed.emit(a, b)
            elif kind == "layout":
                self.layout_finished.emit(a, b)
            elif kind == "conn":
                self.connection_opened.emit(a, b)
            elif kind == "error":
                self.error_reported.emit(a)
        if run:
            self.messages_arrived.emit(run_conn, run)

    def pending(self) -> int:
        """Items waiting for the GUI thread (any thread)."""
        with self._lock:
            return len(self._queue)


def _closer(lock: threading.Lock, queue: deque, room: threading.Condition,
            closed: threading.Event) -> Callable[..., None]:
    """Closing a bridge (also what its ``destroyed`` runs): touches no Qt object."""
    def close(*_args: Any) -> None:
        with lock:
            closed.set()
            queue.clear()
            room.notify_all()
    return close
