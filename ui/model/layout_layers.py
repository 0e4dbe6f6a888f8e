"""Layering for the layered layout: cycle removal, layering and long-edge splitting.

Internal to :mod:`tensorscope.ui.model.layout`. Nodes are the integers ``0..n-1`` and
every function is plain Python (no Qt, no numpy), deterministic for a given
input order.
"""
from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field


def break_cycles(n: int, edges: list[tuple[int, int]]) -> list[bool]:
    """Return, per edge, whether to reverse it so that the graph becomes acyclic.

    Eades-Lin-Smyth greedy feedback arc set: peel sinks to the back and
    sources to the front; when neither is left, move the node with the most
    surplus of outgoing over incoming edges to the front. Edges that point
    backwards in the resulting order are reversed (none for a DAG). Ties go
    to the lower index, so the result is deterministic. Self-loops must have
    been removed by the caller.
    """
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        succ[u].append(v)
        pred[v].append(u)
    if is_acyclic(n, succ, pred):
        return [False] * len(edges)
    position = _GreedyOrder(succ, pred).positions()
    return [position[u] > position[v] for u, v in edges]


class _GreedyOrder:
    """The vertex sequence of Eades-Lin-Smyth, with lazily invalidated queues."""

    def __init__(self, succ: list[list[int]], pred: list[list[int]]) -> None:
        n = len(succ)
        self.succ, self.pred = succ, pred
        self.outd = [len(s) for s in succ]
        self.ind = [len(p) for p in pred]
        self.alive = [True] * n
        self.sinks = deque(v for v in range(n) if self.outd[v] == 0)
        self.sources = deque(v for v in range(n) if self.outd[v] and self.ind[v] == 0)
        self.heap = [(self.ind[v] - self.outd[v], v) for v in range(n)
                     if self.outd[v] and self.ind[v]]
        heapq.heapify(self.heap)

    def positions(self) -> list[int]:
        """Position of every node in the sequence (sources first, sinks last)."""
        n = len(self.succ)
        position = [0] * n
        front, back = 0, n - 1
        alive, ind, outd = self.alive, self.ind, self.outd
        for _ in range(n):
            while True:
                if self.sinks:
                    v = self.sinks.popleft()
                    if alive[v]:
                        position[v], back = back, back - 1
                        break
                    continue
                if self.sources:
                    v = self.sources.popleft()
                else:
                    prio, v = heapq.heappop(self.heap)
                    if prio != ind[v] - outd[v]:
                        continue
                if alive[v] and outd[v]:
                    position[v], front = front, front + 1
                    break
            self._remove(v)
        return position

    def _remove(self, v: int) -> None:
        self.alive[v] = False
        for w in self.succ[v]:
            if self.alive[w]:
                self.ind[w] -= 1
                self._requeue(w)
        for w in self.pred[v]:
            if self.alive[w]:
                self.outd[w] -= 1
                self._requeue(w)

    def _requeue(self, w: int) -> None:
        """Queue w again after its degrees changed (stale entries are skipped)."""
        if self.outd[w] == 0:
            self.sinks.append(w)
        elif self.ind[w] == 0:
            self.sources.append(w)
        else:
            heapq.heappush(self.heap, (self.ind[w] - self.outd[w], w))


def is_acyclic(n: int, succ: list[list[int]], pred: list[list[int]]) -> bool:
    """Whether a topological order covers every node (the common case, fast)."""
    try:
        topological_order(n, succ, pred)
    except ValueError:
        return False
    return True


def topological_order(n: int, succ: list[list[int]], pred: list[list[int]]) -> list[int]:
    """Kahn's algorithm, taking ready nodes first-in first-out (deterministic)."""
    indeg = [len(p) for p in pred]
    ready = deque(v for v in range(n) if indeg[v] == 0)
    order: list[int] = []
    while ready:
        u = ready.popleft()
        order.append(u)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    if len(order) != n:
        raise ValueError("layout: the graph still has a cycle after cycle removal")
    return order


def assign_layers(n: int, succ: list[list[int]], pred: list[list[int]]) -> list[int]:
    """Longest-path layering, then shorten edges by moving unbalanced nodes.

    A node with more outgoing than incoming edges moves down next to its
    highest successor (and the reverse), which pulls sources such as
    parameters right above their consumer. Each move strictly shortens the
    total edge length, so the passes terminate.
    """
    order = topological_order(n, succ, pred)
    layer = [0] * n
    for v in order:
        for u in pred[v]:
            if layer[u] + 1 > layer[v]:
                layer[v] = layer[u] + 1
    for _ in range(8):
        changed = False
        for v in reversed(order):
            s = succ[v]
            if s and len(s) > len(pred[v]):
                target = min(layer[w] for w in s) - 1
                if target > layer[v]:
                    layer[v] = target
                    changed = True
        for v in order:
            p = pred[v]
            if p and len(p) > len(succ[v]):
                target = max(layer[w] for w in p) + 1
                if target < layer[v]:
                    layer[v] = target
                    changed = True
        if not changed:
            break
    return layer


def components(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """Weakly connected component id per node, numbered by first node."""
    parent = list(range(n))

    def find(x: int) -> int:
        root = x
        while parent[root] != root:
            root = parent[root]
        while parent[x] != root:
            parent[x], x = root, parent[x]
        return root

    for u, v in edges:
        ru, rv = find(u), find(v)
        if ru != rv:
            if ru < rv:
                parent[rv] = ru
            else:
                parent[ru] = rv
    ids: dict[int, int] = {}
    return [ids.setdefault(find(v), len(ids)) for v in range(n)]


def compact_layers(layer: list[int], comp: list[int]) -> list[int]:
    """Renumber each component's layers to 0, 1, 2... without empty layers."""
    used: dict[int, set[int]] = {}
    for v, r in enumerate(layer):
        used.setdefault(comp[v], set()).add(r)
    remap = {c: {r: i for i, r in enumerate(sorted(rs))} for c, rs in used.items()}
    return [remap[comp[v]][r] for v, r in enumerate(layer)]


@dataclass
class LayeredGraph:
    """A proper layered graph: real nodes ``0..n_real-1``, then dummy nodes.

    ``up[v]``/``down[v]`` list neighbours one layer above/below (with
    repeats for parallel edges); ``chains[e]`` lists the nodes edge ``e`` passes
    through, top to bottom.
    """

    n_real: int
    layer: list[int]
    comp: list[int]
    up: list[list[int]] = field(default_factory=list)
    down: list[list[int]] = field(default_factory=list)
    chains: list[list[int]] = field(default_factory=list)
    up1: list[int] = field(default_factory=list)
    down1: list[int] = field(default_factory=list)
    n_comps: int = 1

    def finish(self) -> None:
        """Cache the lone neighbour of single-neighbour sides (-1 otherwise)."""
        self.up1 = [u[0] if len(u) == 1 else -1 for u in self.up]
        self.down1 = [d[0] if len(d) == 1 else -1 for d in self.down]
        self.n_comps = 1 + max(self.comp, default=-1)

    @property
    def n(self) -> int:
        """Number of nodes, dummies included."""
        return len(self.layer)


def dummy_budget(n: int, n_edges: int) -> int:
    """Most dummy nodes to create; beyond it the longest edges are drawn straight."""
    return 2 * (n + n_edges) + 10_000


def split_long_edges(n: int, edges: list[tuple[int, int]], layer: list[int],
                     comp: list[int]) -> LayeredGraph:
    """Insert a dummy node on every layer that an edge crosses.

    On pathological graphs (dense cycles make very deep layerings) the
    longest edges beyond :func:`dummy_budget` get no dummies: they are drawn
    as straight lines and ignored by crossing reduction (``chains[e]`` is
    then just ``[u, v]`` and the pair is not in ``up``/``down``).
    """
    g = LayeredGraph(n, list(layer), list(comp),
                     [[] for _ in range(n)], [[] for _ in range(n)], [])
    straight = _straight_edges(edges, layer, dummy_budget(n, len(edges)))
    lay, cmp_, up, down = g.layer, g.comp, g.up, g.down
    for e, (u, v) in enumerate(edges):
        if e in straight:
            g.chains.append([u, v])
            continue
        chain = [u]
        prev = u
        for r in range(layer[u] + 1, layer[v]):
            d = len(lay)
            lay.append(r)
            cmp_.append(comp[u])
            up.append([prev])
            down.append([])
            down[prev].append(d)
            chain.append(d)
            prev = d
        down[prev].append(v)
        up[v].append(prev)
        chain.append(v)
        g.chains.append(chain)
    g.finish()
    return g


def _straight_edges(edges: list[tuple[int, int]], layer: list[int], budget: int) -> set[int]:
    spans = [layer[v] - layer[u] - 1 for u, v in edges]
    total = sum(spans)
    straight: set[int] = set()
    if total <= budget:
        return straight
    for e in sorted(range(len(edges)), key=lambda e: (-spans[e], e)):
        if total <= budget:
            break
        straight.add(e)
        total -= spans[e]
    return straight
