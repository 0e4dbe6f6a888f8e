"""Graph preparation on a worker thread; results come back via the bridge.

The GUI thread never waits for a graph: building the graph model of a new
structure (container folding for 20k nodes takes seconds), computing the
visible graph, the cards' texts and sizes and the layered layout all run on
a worker. The worker posts ``(token, Prepared | Exception)`` through the
bridge; results for an outdated token are ignored by the caller.

The worker is a plain Python thread that makes no Qt object: no QObject, no
QGraphicsItem, not even a font or a rectangle (texts and sizes are plain
data, ``ui/model/cards.py``; the GUI thread makes the cards in
``GraphView.apply_layout``). Its one touch of Qt is ``Bridge.post_layout``.
A worker that made Qt objects could deadlock the GUI: a GUI thread that
destroys an old window holds the GIL and waits on a Qt lock that such a
worker can hold while it waits for the GIL.

Each runner lays out one graph: one job at a time, and a job submitted while
another waits replaces it (the replaced one is answered ``CANCELLED``). The
running job stops at its next ``checkpoint()`` once a newer one is submitted;
``prepare`` hands ``checkpoint`` to the layout, which calls it between its
stages and inside its long loops (``ui/model/layout.py``).
``close()`` (the window closes, the panel or the bridge is destroyed) drops
the waiting job and waits for the running one; from then on no worker of the
runner touches Qt.
"""
from __future__ import annotations

import itertools
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import networkx as nx

from tensorscope.ui.bridge import Bridge
from tensorscope.ui.model.cards import CardText, TextWidths, card_sizes, card_texts
from tensorscope.ui.model.graph_model import GraphModel

log = logging.getLogger("tensorscope.ui")
NODE_GAP = 36.0
LAYER_GAP = 48.0
CLOSE_WAIT_S = 10.0   # how long closing waits for a running job (it stops at a checkpoint)


class LayoutCancelled(Exception):
    """Raised by ``checkpoint()`` inside a job that is no longer wanted."""


CANCELLED = LayoutCancelled("superseded by a newer layout")   # the answer to a dropped job


@dataclass
class Prepared:
    """A graph ready to draw: its model, visible graph, card texts, sizes and layout."""

    model: GraphModel
    visible: nx.DiGraph
    texts: dict[str, CardText]
    sizes: dict[str, tuple[float, float]]
    layout: Any
    seconds: float = 0.0


_job = threading.local()   # the worker's (runner, token)


def checkpoint() -> None:
    """Raise ``LayoutCancelled`` if the job running on this thread is superseded or
    its runner closed (worker thread; does nothing on other threads)."""
    current = getattr(_job, "current", None)
    if current is not None and not current[0].wanted(current[1]):
        raise LayoutCancelled("superseded by a newer layout")


def prepare(model: GraphModel, describe: Callable[[dict], tuple[str, str]],
            widths: TextWidths, previous: Any = None) -> Prepared:
    """Visible graph → card texts and sizes → layout (any thread; ``model`` is not
    shared yet; ``widths`` measured on the GUI thread)."""
    from tensorscope.ui.model.layout import layered_layout
    start = time.perf_counter()
    vis = model.visible_graph()
    checkpoint()
    texts = card_texts(vis, describe)
    sizes = card_sizes(texts, widths)
    checkpoint()
    structure = nx.DiGraph()
    structure.add_nodes_from(vis.nodes)
    structure.add_edges_from(vis.edges)
    layout = layered_layout(structure, sizes, node_gap=NODE_GAP,
                            layer_gap=LAYER_GAP, previous=previous, check=checkpoint)
    return Prepared(model, vis, texts, sizes, layout, time.perf_counter() - start)


class LayoutRunner:
    """Runs one graph's jobs on a worker; remembers the newest token (GUI thread)."""

    _tokens = itertools.count(1)

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge
        self.latest = 0
        self.previous = None   # the last applied layout (seeds incremental ones)
        self._cond = threading.Condition()
        self._waiting: tuple[int, Callable[[], Any]] | None = None
        self._running: int | None = None
        self._worker: threading.Thread | None = None
        self._closed = False
        #: jobs that stopped at a checkpoint (superseded or closed), for the log and tests
        self.stopped = 0
        bridge.destroyed.connect(lambda *_: self.close())

    def submit(self, work: Callable[[], Any]) -> int:
        """Run ``work()`` on a worker; its result is posted with the returned token."""
        token = next(self._tokens)
        self.latest = token
        with self._cond:
            if self._closed:
                return token
            replaced, self._waiting = self._waiting, (token, work)
            if replaced is not None:
                self._post(replaced[0], CANCELLED)
            self._cond.notify_all()
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, daemon=True,
                                                name="tensorscope-layout")
                self._worker.start()
        return token

    def is_current(self, token: int) -> bool:
        """Whether ``token`` is the newest submitted job."""
        return token == self.latest

    def wanted(self, token: int) -> bool:
        """Whether the job ``token`` should go on (any thread)."""
        return not self._closed and token == self.latest

    def close(self, timeout: float = CLOSE_WAIT_S) -> bool:
        """Drop the waiting job, stop the running one and wait for it (GUI thread).

        Returns whether no job runs any more (the worker thread is then joined).
        Either way no job of this runner posts after ``close`` returns.
        """
        with self._cond:
            self._closed = True
            self._waiting = None
            self._cond.notify_all()
            stopped = self._cond.wait_for(lambda: self._running is None, timeout)
            worker = self._worker
        if stopped and worker is not None and worker is not threading.current_thread():
            worker.join(timeout)   # it only takes the lock once more and returns
        return stopped

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called (any thread)."""
        return self._closed

    def busy(self) -> bool:
        """Whether a job runs or waits."""
        with self._cond:
            return self._running is not None or self._waiting is not None

    def _run(self) -> None:  # worker thread
        while True:
            with self._cond:
                if self._waiting is None or self._closed:
                    self._worker = None
                    return
                (token, work), self._waiting = self._waiting, None
                self._running = token
            _job.current = (self, token)
            try:
                result = work()
            except Exception as exc:  # reported to the GUI, which shows it
                result = exc
            finally:
                _job.current = None
            with self._cond:
                if isinstance(result, LayoutCancelled):
                    self.stopped += 1
                self._running = None
                if not self._closed:
                    self._post(token, result)
                self._cond.notify_all()

    def _post(self, token: int, result: Any) -> None:
        """Hand a result to the GUI thread (``_cond`` held, so ``close`` orders after it)."""
        try:
            self.bridge.post_layout(token, result)
        except RuntimeError as exc:   # the bridge's Qt object is gone: so is the window
            log.debug("layout result dropped: %s", exc)
            self._closed = True
