"""Graph preparation on a worker thread; results come back via the bridge.

The GUI thread never waits for a graph: building the graph model of a new
structure (container folding for 20k nodes takes seconds), computing the
visible graph, sizing the cards and the layered layout all run in a QRunnable.
The worker posts ``(token, Prepared | Exception)`` through the bridge;
results for an outdated token are ignored by the caller.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any, Callable

import networkx as nx
from PySide6.QtCore import QRunnable, QThreadPool

from tensorscope.ui.bridge import Bridge
from tensorscope.ui.graph_items import Card
from tensorscope.ui.model.graph_model import GraphModel

NODE_GAP = 36.0
LAYER_GAP = 48.0


@dataclass
class Prepared:
    """A graph ready to draw: its model, visible graph, cards and layout."""

    model: GraphModel
    visible: nx.DiGraph
    cards: dict[str, Card]
    layout: Any
    seconds: float = 0.0


def prepare(model: GraphModel, describe: Callable[[dict], tuple[str, str]],
            previous: Any = None) -> Prepared:
    """Visible graph → cards → layout (any thread; ``model`` is not shared yet)."""
    from tensorscope.ui.graph_view import build_cards, card_sizes
    from tensorscope.ui.model.layout import layered_layout
    start = time.perf_counter()
    vis = model.visible_graph()
    cards = build_cards(vis, describe)
    structure = nx.DiGraph()
    structure.add_nodes_from(vis.nodes)
    structure.add_edges_from(vis.edges)
    layout = layered_layout(structure, card_sizes(cards), node_gap=NODE_GAP,
                            layer_gap=LAYER_GAP, previous=previous)
    return Prepared(model, vis, cards, layout, time.perf_counter() - start)


class _Job(QRunnable):
    def __init__(self, bridge: Bridge, token: int, work: Callable[[], Any]) -> None:
        super().__init__()
        self.bridge, self.token, self.work = bridge, token, work
        self.setAutoDelete(True)

    def run(self) -> None:  # worker thread
        try:
            result = self.work()
        except Exception as exc:  # reported to the GUI, which shows it
            result = exc
        self.bridge.post_layout(self.token, result)


class LayoutRunner:
    """Submits graph jobs for one view; remembers the newest token (GUI thread)."""

    _tokens = itertools.count(1)

    def __init__(self, bridge: Bridge, pool: QThreadPool | None = None) -> None:
        self.bridge = bridge
        self.pool = pool or QThreadPool.globalInstance()
        self.latest = 0
        self.previous = None   # the last applied layout (seeds incremental ones)

    def submit(self, work: Callable[[], Any]) -> int:
        """Run ``work()`` on a worker; its result is posted with the returned token."""
        token = next(self._tokens)
        self.latest = token
        self.pool.start(_Job(self.bridge, token, work))
        return token

    def is_current(self, token: int) -> bool:
        """Whether ``token`` is the newest submitted job."""
        return token == self.latest
