"""Layered top-to-bottom (Sugiyama-style) graph layout, fast enough for 20k nodes.

Pipeline (modules ``layout_layers``, ``layout_order``, ``layout_vector``,
``layout_coords``):

1. cycles: reverse the edges that point backwards in a greedy feedback-arc-set
   order (Eades-Lin-Smyth; nothing is reversed in a DAG); self-loops are
   drawn as small loops and otherwise ignored;
2. layering: longest path, then nodes with more outgoing than incoming edges
   (or the reverse) move to shorten them; one dummy node per layer that a
   long edge crosses (within a budget, see ``layout_layers.dummy_budget``);
3. crossing reduction: dot's weighted-median sweeps, each followed by
   adjacent transpositions (numpy odd-even rounds on big sparse graphs),
   keeping the best order seen, counted exactly with numpy;
4. coordinates: per layer, the weighted least-squares placement under the
   neighbours' median that keeps nodes ``node_gap`` apart (isotonic
   regression), alternating down and up; dummies and chain links pull hard,
   so long edges and chains run straight.

Weakly connected components sit side by side, left to right in node order.
With ``previous`` the ordering is seeded from an earlier layout so that a
collapse or expand moves the picture little.

A caller that may stop wanting the result passes ``check``: a function called
between stages and inside every long loop (each sweep, transposition round,
coordinate pass and every few hundred rows), which raises to stop the layout.
The layout module never catches what it raises, so the caller's own exception
(the runner's ``LayoutCancelled``) comes out of :func:`layered_layout`.

Pure Python + numpy + networkx (no Qt, no torch): the GUI calls
:func:`layered_layout` off the GUI thread. The output is deterministic for a
given graph (node and edge insertion order included).
"""
from __future__ import annotations

import gc
import math
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

import networkx as nx

from tensorscope.ui.model import layout_coords, layout_order, layout_layers

DEFAULT_SIZE = (80.0, 30.0)
LOOP_SIZE = 14.0          # how far a self-loop sticks out to the right of its node

Point = tuple[float, float]
#: called at the layout's checkpoints; raises to stop the layout
Check = Callable[[], None]


def no_check() -> None:
    """The default :data:`Check`: a layout nobody cancels."""


@dataclass
class Layout:
    """Result of a layout; y grows downward, the top-left corner is (0, 0).

    ``positions`` are node centres; ``edge_points[(u, v)]`` is a polyline from
    ``u``'s border to ``v``'s border through the dummy positions of long edges
    (self-loops get a small loop on the right); ``layers`` is each node's layer
    (0 at the top, per component); ``layer_y`` is each layer's centre y.
    """

    positions: dict[Hashable, Point]
    edge_points: dict[tuple[Hashable, Hashable], list[Point]]
    layers: dict[Hashable, int]
    width: float
    height: float
    layer_y: list[float] = field(default_factory=list)


def _sizes(nodes: list[Hashable], sizes: Mapping[Hashable, tuple[float, float]] | None
           ) -> tuple[list[float], list[float]]:
    widths, heights = [], []
    for v in nodes:
        size = sizes.get(v, DEFAULT_SIZE) if sizes is not None else DEFAULT_SIZE
        try:
            w, h = (float(s) for s in size)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"layout: node {v!r} has size {size!r}; "
                             "expected (width, height) numbers") from exc
        if not (math.isfinite(w) and math.isfinite(h) and w >= 0 and h >= 0):
            raise ValueError(f"layout: node {v!r} has size ({w}, {h}); "
                             "sizes must be finite and non-negative")
        widths.append(w)
        heights.append(h)
    return widths, heights


def _seed(nodes: list[Hashable], edges: list[tuple[int, int]], previous: Layout) -> list[float]:
    """Previous x per node; new nodes take the mean x of their known neighbours."""
    old = previous.positions
    seed = [old[v][0] if v in old else math.nan for v in nodes]
    adj: list[list[int]] = [[] for _ in nodes]
    for u, v in edges:
        adj[u].append(v)
        adj[v].append(u)
    queue = deque(i for i, s in enumerate(seed) if not math.isnan(s))
    while queue:                     # spread outwards through regions of new nodes
        for b in adj[queue.popleft()]:
            if math.isnan(seed[b]):
                xs = [seed[c] for c in adj[b] if not math.isnan(seed[c])]
                seed[b] = sum(xs) / len(xs)
                queue.append(b)
    right = max((s for s in seed if not math.isnan(s)), default=0.0) + 1.0
    return [right if math.isnan(s) else s for s in seed]


def _seeded_order(g: layout_layers.LayeredGraph, seed: list[float], previous: Layout,
                  edge_keys: list[tuple[Hashable, Hashable]], rev: list[bool]) -> list[list[int]]:
    """Layers sorted by previous x; a long edge's dummies reuse its previous bends."""
    key = seed + [0.0] * (g.n - g.n_real)
    for chain, ek, r in zip(g.chains, edge_keys, rev):
        inner = chain[1:-1]
        old = previous.edge_points.get(ek)
        if old is not None and len(old) == len(chain):
            bends = old[1:-1][::-1] if r else old[1:-1]
            for d, (bx, _) in zip(inner, bends):
                key[d] = bx
            continue
        a, b = chain[0], chain[-1]
        for i, d in enumerate(inner, start=1):
            key[d] = seed[a] + (seed[b] - seed[a]) * i / (len(chain) - 1)
    layers: list[list[int]] = [[] for _ in range(1 + max(g.layer, default=-1))]
    for v in range(g.n):
        layers[g.layer[v]].append(v)
    for row in layers:
        row.sort(key=lambda v: (g.comp[v], key[v], v))
    return layers


def _iterations(n: int) -> tuple[int, int]:
    """(max_iter, min_quit) of crossing reduction for ``n`` nodes with dummies.

    Measured on deep-net-like DAGs: nearly all of the gain comes in the first
    four sweeps, so big graphs stop sooner to stay interactive.
    """
    if n <= 4_000:
        return 24, 6
    if n <= 15_000:
        return 12, 3
    return 4, 2


def layered_layout(graph: nx.DiGraph, sizes: Mapping[Hashable, tuple[float, float]] | None = None,
                   *, node_gap: float = 30.0, layer_gap: float = 60.0,
                   previous: Layout | None = None, check: Check = no_check) -> Layout:
    """Lay ``graph`` out top to bottom; ``sizes`` maps node → (width, height).

    Nodes missing from ``sizes`` get :data:`DEFAULT_SIZE`. With ``previous``
    (the layout before a container was collapsed or expanded), each layer
    starts from the previous left-to-right order, new nodes next to their
    neighbours, so the picture moves little; crossing reduction then only
    keeps changes that do not add crossings. Runs on any thread. ``check`` is
    called at every checkpoint (see the module docstring); what it raises
    propagates.
    """
    with _cyclic_gc_paused():
        return _layered_layout(graph, sizes, node_gap, layer_gap, previous, check)


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a layout runs.

    A 20k-node layout allocates a few hundred thousand small lists and tuples,
    none in reference cycles; generational passes over them cost ~12 % of the
    run. Reference counting still frees everything. Only the caller that
    switched it off switches it back on.
    """
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def _layered_layout(graph: nx.DiGraph, sizes: Mapping[Hashable, tuple[float, float]] | None,
                    node_gap: float, layer_gap: float, previous: Layout | None,
                    check: Check) -> Layout:
    if node_gap < 0 or layer_gap < 0:
        raise ValueError("layout: node_gap and layer_gap must be non-negative")
    nodes = list(graph.nodes)
    index = {v: i for i, v in enumerate(nodes)}
    widths, heights = _sizes(nodes, sizes)
    edge_keys, edges, loops = _split_edges(graph, index)
    n = len(nodes)
    check()
    rev = layout_layers.break_cycles(n, edges)
    check()
    dag = [(v, u) if r else (u, v) for (u, v), r in zip(edges, rev)]
    seed = _seed(nodes, edges, previous) if previous is not None else None
    g = _layered_graph(n, dag, _components(n, dag, seed))
    check()
    sep_widths = list(widths)
    for v in loops:
        sep_widths[index[v]] += 2 * LOOP_SIZE
    sep_widths += [0.0] * (g.n - n)
    if seed is None:
        order = layout_order.initial_order(g)
    else:
        order = _seeded_order(g, seed, previous, edge_keys, rev)
    check()
    max_iter, min_quit = _iterations(g.n)
    order, _ = layout_order.reduce_crossings(g, order, max_iter=max_iter, min_quit=min_quit,
                                             keep_start=seed is not None, check=check)
    check()
    x = layout_coords.assign_x(g, order, sep_widths, node_gap, check=check)
    check()
    width = layout_coords.pack_components(g, x, sep_widths, node_gap * 2)
    layer_y, height = layout_coords.assign_y(g, order, heights, layer_gap)
    return _build(nodes, widths, heights, g, x, layer_y, width, height,
                  edge_keys, rev, loops, index)


def _split_edges(graph: nx.DiGraph, index: dict[Hashable, int]
                 ) -> tuple[list[tuple[Hashable, Hashable]], list[tuple[int, int]], list[Hashable]]:
    """(edge keys, the same edges as index pairs, nodes with a self-loop)."""
    edge_keys: list[tuple[Hashable, Hashable]] = []
    edges: list[tuple[int, int]] = []
    loops: list[Hashable] = []
    for u, v in graph.edges():
        if u == v:
            loops.append(u)
        else:
            edge_keys.append((u, v))
            edges.append((index[u], index[v]))
    return edge_keys, edges, loops


def _layered_graph(n: int, dag: list[tuple[int, int]], comp: list[int]) -> layout_layers.LayeredGraph:
    """Layer the acyclic edge list and split its long edges."""
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for u, v in dag:
        succ[u].append(v)
        pred[v].append(u)
    layer = layout_layers.compact_layers(layout_layers.assign_layers(n, succ, pred), comp)
    return layout_layers.split_long_edges(n, dag, layer, comp)


def _components(n: int, dag: list[tuple[int, int]], seed: list[float] | None) -> list[int]:
    comp = layout_layers.components(n, dag)
    if seed is None:
        return comp
    total: dict[int, list[float]] = {}
    for v, c in enumerate(comp):
        total.setdefault(c, [0.0, 0.0])
        total[c][0] += seed[v]
        total[c][1] += 1
    ordered = sorted(total, key=lambda c: (total[c][0] / total[c][1], c))
    renumber = {c: i for i, c in enumerate(ordered)}
    return [renumber[c] for c in comp]


def _build(nodes: list[Hashable], widths: list[float], heights: list[float],
           g: layout_layers.LayeredGraph, x: list[float], layer_y: list[float],
           width: float, height: float, edge_keys: list[tuple[Hashable, Hashable]],
           rev: list[bool], loops: list[Hashable], index: dict[Hashable, int]) -> Layout:
    """Assemble the public :class:`Layout` from the internal arrays."""
    lay = g.layer
    ny = [layer_y[r] for r in lay]
    half = [h * 0.5 for h in heights]
    positions = {v: (x[i], ny[i]) for i, v in enumerate(nodes)}
    edge_points: dict[tuple[Hashable, Hashable], list[Point]] = {}
    for key, chain, r in zip(edge_keys, g.chains, rev):
        top, bottom = chain[0], chain[-1]
        if len(chain) == 2:
            pts = [(x[top], ny[top] + half[top]), (x[bottom], ny[bottom] - half[bottom])]
        else:
            pts = [(x[top], ny[top] + half[top])]
            pts.extend([(x[d], ny[d]) for d in chain[1:-1]])
            pts.append((x[bottom], ny[bottom] - half[bottom]))
        edge_points[key] = pts[::-1] if r else pts
    for v in loops:
        cx, cy = positions[v]
        i = index[v]
        right = cx + widths[i] * 0.5
        dy = heights[i] * 0.25
        edge_points[(v, v)] = [(right, cy - dy), (right + LOOP_SIZE, cy - dy),
                               (right + LOOP_SIZE, cy + dy), (right, cy + dy)]
    layers = {v: lay[i] for i, v in enumerate(nodes)}
    return Layout(positions, edge_points, layers, width, height, layer_y)


def _layer_ys(layout: Layout) -> list[float]:
    if layout.layer_y:
        return list(layout.layer_y)
    ys: dict[int, float] = {}
    for v, r in layout.layers.items():
        ys.setdefault(r, layout.positions[v][1])
    return [ys.get(r, math.nan) for r in range(1 + max(ys, default=-1))]


def _x_at(points: list[Point], y: float) -> float:
    """x where a polyline (monotone in y, either direction) passes height y."""
    pts = points if points[0][1] <= points[-1][1] else points[::-1]
    ys = [p[1] for p in pts]
    i = bisect_right(ys, y)
    if i == 0:
        return pts[0][0]
    if i >= len(pts):
        return pts[-1][0]
    (x0, y0), (x1, y1) = pts[i - 1], pts[i]
    return x0 if y1 == y0 else x0 + (x1 - x0) * (y - y0) / (y1 - y0)


def count_crossings(graph: nx.DiGraph, layout: Layout) -> int:
    """Edge crossings between adjacent layers, long edges counted at every layer.

    Works on any :class:`Layout` (also one converted from another tool): an
    edge's x on an intermediate layer is read off its polyline at that
    layer's y. Self-loops and edges within one layer are ignored.
    """
    ys = _layer_ys(layout)
    segments: dict[int, list[tuple[float, float]]] = {}
    for u, v in graph.edges():
        lu, lv = layout.layers[u], layout.layers[v]
        if lu == lv:
            continue
        if lu > lv:
            u, v, lu, lv = v, u, lv, lu
        xs = [layout.positions[u][0]]
        pts = (layout.edge_points.get((u, v)) or layout.edge_points.get((v, u))
               or [layout.positions[u], layout.positions[v]])
        for r in range(lu + 1, lv):
            xs.append(_x_at(pts, ys[r]))
        xs.append(layout.positions[v][0])
        for r, (a, b) in enumerate(zip(xs, xs[1:]), start=lu):
            segments.setdefault(r, []).append((a, b))
    total = 0
    for segs in segments.values():
        segs.sort()
        total += layout_order.inversions([b for _, b in segs])
    return total
