"""Runs ``layered_layout`` on a worker thread; results come back via the bridge.

The GUI thread never waits for a layout: ``submit`` copies the visible graph,
starts a QRunnable and returns a token. When the worker finishes it posts
``(token, Layout | Exception)`` through the bridge; results for an outdated
token are ignored by the caller.
"""
from __future__ import annotations

import itertools
import time
from typing import Hashable, Mapping

import networkx as nx
from PySide6.QtCore import QRunnable, QThreadPool

from tensorscope.ui.bridge import Bridge

NODE_GAP = 36.0
LAYER_GAP = 48.0


class _LayoutJob(QRunnable):
    def __init__(self, bridge: Bridge, token: int, graph: nx.DiGraph,
                 sizes: dict[Hashable, tuple[float, float]], previous) -> None:
        super().__init__()
        self.bridge, self.token, self.graph = bridge, token, graph
        self.sizes, self.previous = sizes, previous
        self.setAutoDelete(True)

    def run(self) -> None:  # worker thread
        from tensorscope.ui.layout import layered_layout
        start = time.perf_counter()
        try:
            result = layered_layout(self.graph, self.sizes, node_gap=NODE_GAP,
                                    layer_gap=LAYER_GAP, previous=self.previous)
            result.elapsed = time.perf_counter() - start
        except Exception as exc:  # reported to the GUI, which shows it
            result = exc
        self.bridge.post_layout(self.token, result)


class LayoutRunner:
    """Submits layouts for one view; remembers the newest token (GUI thread)."""

    _tokens = itertools.count(1)

    def __init__(self, bridge: Bridge, pool: QThreadPool | None = None) -> None:
        self.bridge = bridge
        self.pool = pool or QThreadPool.globalInstance()
        self.latest = 0
        self.previous = None

    def submit(self, graph: nx.DiGraph, sizes: Mapping[Hashable, tuple[float, float]],
               incremental: bool = False) -> int:
        """Start a layout of a copy of ``graph``; returns its token."""
        token = next(self._tokens)
        self.latest = token
        structure = nx.DiGraph()
        structure.add_nodes_from(graph.nodes)
        structure.add_edges_from(graph.edges)
        job = _LayoutJob(self.bridge, token, structure, dict(sizes),
                         self.previous if incremental else None)
        self.pool.start(job)
        return token

    def is_current(self, token: int) -> bool:
        """Whether ``token`` is the newest submitted layout."""
        return token == self.latest
