"""The layered layout: correctness, crossing reduction, robustness, determinism."""
from __future__ import annotations

import random

import networkx as nx
import pytest

from tensorscope.ui.model import layout_order, layout_layers
from tensorscope.ui.model.layout import Layout, count_crossings, layered_layout


def _dag(n: int, seed: int = 1, width: int = 5, skip: float = 0.3) -> nx.DiGraph:
    """A small layered DAG with skip edges, nodes inserted in shuffled order."""
    rng = random.Random(seed)
    layers, count = [], 0
    while count < n:
        w = min(rng.randint(1, width), n - count)
        layers.append(list(range(count, count + w)))
        count += w
    g = nx.DiGraph()
    order = list(range(n))
    rng.shuffle(order)
    g.add_nodes_from(order)
    for i in range(1, len(layers)):
        for v in layers[i]:
            for u in rng.sample(layers[i - 1], min(2, len(layers[i - 1]))):
                g.add_edge(u, v)
            if i >= 2 and rng.random() < skip:
                g.add_edge(rng.choice(layers[max(0, i - rng.randint(2, 5))]), v)
    return g


def _layered(g: nx.DiGraph, compact: bool = True, components: bool = True):
    """``g`` layered (and compacted) with long edges split, as the layout's first
    stages do; ``components=False`` puts every node in component 0."""
    n, idx = g.number_of_nodes(), {v: i for i, v in enumerate(g.nodes)}
    edges = [(idx[u], idx[v]) for u, v in g.edges]
    succ, pred = [[] for _ in range(n)], [[] for _ in range(n)]
    for u, v in edges:
        succ[u].append(v)
        pred[v].append(u)
    comp = layout_layers.components(n, edges) if components else [0] * n
    layer = layout_layers.assign_layers(n, succ, pred)
    if compact:
        layer = layout_layers.compact_layers(layer, comp)
    return layout_layers.split_long_edges(n, edges, layer, comp)



def _check(g: nx.DiGraph, lay: Layout, sizes: dict | None = None, size=(80.0, 30.0)) -> None:
    """Every node placed; no overlap in a layer; polylines end on their nodes."""
    sizes = sizes or {}
    assert set(lay.positions) == set(g.nodes) == set(lay.layers)
    by_layer: dict[int, list] = {}
    for v, r in lay.layers.items():
        by_layer.setdefault(r, []).append(v)
    for nodes in by_layer.values():
        ys = {lay.positions[v][1] for v in nodes}
        assert len(ys) == 1
        spans = sorted((lay.positions[v][0] - sizes.get(v, size)[0] / 2,
                        lay.positions[v][0] + sizes.get(v, size)[0] / 2) for v in nodes)
        for (_, right), (left, _) in zip(spans, spans[1:]):
            assert left >= right - 1e-6
    for v, (x, y) in lay.positions.items():
        w, h = sizes.get(v, size)
        assert -1e-6 <= x - w / 2 and x + w / 2 <= lay.width + 1e-6
        assert -1e-6 <= y - h / 2 and y + h / 2 <= lay.height + 1e-6
    assert set(lay.edge_points) == set(g.edges)
    for (u, v), pts in lay.edge_points.items():
        for node, (px, py) in ((u, pts[0]), (v, pts[-1])):
            (cx, cy), (w, h) = lay.positions[node], sizes.get(node, size)
            assert abs(px - cx) <= w / 2 + 1e-6 and abs(py - cy) <= h / 2 + 1e-6


def test_layers_respect_edges_and_nodes_do_not_overlap():
    g = _dag(300)
    sizes = {v: (20.0 + 7 * (v % 9), 10.0 + 3 * (v % 4)) for v in g.nodes}
    lay = layered_layout(g, sizes)
    _check(g, lay, sizes)
    assert all(lay.layers[u] < lay.layers[v] for u, v in g.edges)


def test_long_edges_pass_through_every_layer_between_their_ends():
    g = _dag(200)
    lay = layered_layout(g)
    for (u, v), pts in lay.edge_points.items():
        assert len(pts) == lay.layers[v] - lay.layers[u] + 1
        assert [p[1] for p in pts] == sorted(p[1] for p in pts)


def test_cycles_self_loops_and_two_cycles():
    g = nx.DiGraph([(0, 1), (1, 2), (2, 0), (2, 3), (3, 2), (3, 3), (1, 4)])
    lay = layered_layout(g)
    _check(g, lay)
    loop = lay.edge_points[(3, 3)]
    assert loop[0][0] >= lay.positions[3][0] and len(loop) == 4
    reversed_edges = [(u, v) for u, v in g.edges if u != v and lay.layers[u] > lay.layers[v]]
    assert 1 <= len(reversed_edges) <= 2
    for u, v in reversed_edges:   # a reversed edge still runs from u to v
        assert lay.edge_points[(u, v)][0][1] < lay.positions[u][1]


def test_disconnected_components_sit_side_by_side():
    g = nx.DiGraph([("a", "b"), ("b", "c"), ("x", "y"), ("x", "z")])
    g.add_node("lonely")
    lay = layered_layout(g)
    _check(g, lay)
    boxes = []
    for comp in (["a", "b", "c"], ["x", "y", "z"], ["lonely"]):
        xs = [lay.positions[v][0] for v in comp]
        boxes.append((min(xs) - 40, max(xs) + 40))
        assert min(lay.layers[v] for v in comp) == 0
    assert boxes[0][1] < boxes[1][0] and boxes[1][1] < boxes[2][0]


@pytest.mark.parametrize("graph", [nx.DiGraph(), nx.DiGraph([(1, 1)]), nx.path_graph(3, nx.DiGraph)])
def test_empty_and_tiny_graphs(graph):
    lay = layered_layout(graph)
    _check(graph, lay)
    if not graph:
        assert lay.width == 0 and lay.height == 0 and lay.edge_points == {}


def test_chain_edges_are_straight():
    lay = layered_layout(nx.path_graph(6, nx.DiGraph))
    assert len({x for x, _ in lay.positions.values()}) == 1


def _residual_stack(layers: int, fork: int) -> tuple[nx.DiGraph, list[str]]:
    """A pre-norm transformer stack as the module graph draws it: each block's input
    feeds ``fork`` first layers (GPT-2's ln_1: 1; BERT's query, key, value: 3) and a
    skip to the block's join; returns the graph and the joins, top to bottom."""
    g, prev, joins = nx.DiGraph(), "emb", []
    for i in range(layers):
        heads = [f"h{i}.{k}" for k in range(fork)]
        for h in heads:
            g.add_edge(prev, h)
            g.add_edge(h, f"mix{i}")
        for a, b in ((f"mix{i}", f"drop{i}"), (f"drop{i}", f"add{i}"), (prev, f"add{i}"),
                     (f"add{i}", f"mlp{i}"), (f"mlp{i}", f"out{i}"), (f"out{i}", f"join{i}"),
                     (f"add{i}", f"join{i}")):
            g.add_edge(a, b)
        prev = f"join{i}"
        joins.append(prev)
    return g, joins


@pytest.mark.parametrize("fork", [1, 3])
def test_a_residual_stack_stays_in_one_column(fork):
    """The main line of a 12-block residual stack runs straight down and its skips
    beside it: the skips' dummies pulled each block's join half a column over, and
    BERT's 12 layers (fork 3) drifted about 150 px a layer to the right."""
    g, joins = _residual_stack(12, fork)
    lay = layered_layout(g, {v: (180.0, 40.0) for v in g.nodes})
    xs = [lay.positions[j][0] for j in joins]
    assert max(xs) - min(xs) < 20.0, [round(x) for x in xs]
    assert lay.width < 4 * 180.0 + 3 * 40.0


def test_output_is_deterministic():
    g = _dag(250, seed=3)
    a, b = layered_layout(g), layered_layout(g.copy())
    assert a.positions == b.positions and a.edge_points == b.edge_points


def test_bad_sizes_raise_a_clear_error():
    with pytest.raises(ValueError, match="size"):
        layered_layout(nx.DiGraph([(0, 1)]), {0: (float("nan"), 10.0)})
    with pytest.raises(ValueError, match="size"):
        layered_layout(nx.DiGraph([(0, 1)]), {1: "wide"})
    with pytest.raises(ValueError, match="gap"):
        layered_layout(nx.DiGraph([(0, 1)]), node_gap=-1)


def test_count_crossings_on_hand_made_layouts():
    g = nx.DiGraph([("a", "d"), ("b", "c")])
    pos = {"a": (0.0, 0.0), "b": (100.0, 0.0), "c": (0.0, 100.0), "d": (100.0, 100.0)}
    layers = {"a": 0, "b": 0, "c": 1, "d": 1}
    assert count_crossings(g, Layout(pos, {}, layers, 100, 100)) == 1
    g.add_edge("a", "c")       # shares an end with each of them: no extra crossing
    assert count_crossings(g, Layout(pos, {}, layers, 100, 100)) == 1
    g.add_edge("a", "e")       # crosses b -> c only
    pos["e"], layers["e"] = (50.0, 100.0), 1
    assert count_crossings(g, Layout(pos, {}, layers, 100, 100)) == 2
    # a long edge crossing a short one on the middle layer, counted through its polyline
    h = nx.DiGraph([("t", "b1"), ("m", "m2")])
    pos2 = {"t": (0.0, 0.0), "m": (50.0, 50.0), "m2": (50.0, 100.0), "b1": (0.0, 100.0)}
    lay = Layout(pos2, {("t", "b1"): [(0.0, 0.0), (100.0, 50.0), (0.0, 100.0)]},
                 {"t": 0, "m": 1, "m2": 2, "b1": 2}, 100, 100, [0.0, 50.0, 100.0])
    assert count_crossings(h, lay) == 1
    assert layout_order.inversions([3, 1, 2, 2, 0]) == 7


def test_crossing_reduction_untangles_a_k_shaped_graph():
    """Each top node feeds the bottom node at the other end: 0 crossings possible."""
    g = nx.DiGraph()
    tops, bottoms = [f"t{i}" for i in range(6)], [f"b{i}" for i in range(6)]
    g.add_nodes_from(tops + bottoms)
    for i, t in enumerate(tops):
        g.add_edge(t, bottoms[5 - i])
        g.add_edge("hub", t)
        if i < 5:
            g.add_edge(t, bottoms[4 - i])
    lg = _layered(g, compact=False)
    layers = layout_order.initial_order(lg)
    layers[2].reverse()   # a bad start: every pair of edges crosses
    pos = [0] * lg.n
    for row in layers:
        for i, v in enumerate(row):
            pos[v] = i
    before = layout_order.total_crossings(layers, pos, lg.down)
    _, after = layout_order.reduce_crossings(lg, layers)
    assert before > 20 and after == 0
    assert count_crossings(g, layered_layout(g)) == 0


def test_reduces_crossings_against_the_initial_order():
    g = _dag(400, seed=5)
    lg = _layered(g, compact=False, components=False)
    layers = layout_order.initial_order(lg)
    pos = [0] * lg.n
    for row in layers:
        for i, v in enumerate(row):
            pos[v] = i
    before = layout_order.total_crossings(layers, pos, lg.down)
    _, after = layout_order.reduce_crossings(lg, [row[:] for row in layers])
    assert after < 0.6 * before


def _kept_pairs(a: Layout, b: Layout, nodes: list) -> float:
    """Fraction of same-layer node pairs whose left-right order a and b share."""
    kept = total = 0
    for i, u in enumerate(nodes):
        for v in nodes[i + 1:]:
            if a.layers[u] == a.layers[v] and b.layers[u] == b.layers[v]:
                total += 1
                kept += (a.positions[u][0] < a.positions[v][0]) == (b.positions[u][0] < b.positions[v][0])
    return kept / max(1, total)


def test_previous_layout_keeps_the_picture_stable():
    """An expanded graph (new nodes, another insertion order) keeps its old order."""
    g = _dag(150, seed=7)
    first = layered_layout(g)
    mid = sorted(g.nodes)[len(g) // 2]
    extra = [(mid, "new"), ("new", "new2"), (mid, "new3")]
    g2 = nx.DiGraph()
    g2.add_nodes_from(sorted(g.nodes))
    g2.add_edges_from(list(g.edges) + extra)
    second = layered_layout(g2, previous=first)
    _check(g2, second)
    fresh = layered_layout(g2)
    kept = _kept_pairs(first, second, list(g.nodes))
    assert kept >= 0.95 and kept >= _kept_pairs(first, fresh, list(g.nodes))


def test_numpy_crossing_counter_matches_the_plain_count():
    g = _dag(300, seed=11)
    g.add_edges_from(("wide", f"leaf{i}") for i in range(80))      # one big layer pair
    g.add_edges_from((f"leaf{i}", f"leaf{(i * 7) % 80}b") for i in range(80))
    lg = _layered(g)
    counter = layout_order.CrossingCounter(lg)
    assert counter.big
    rng = random.Random(0)
    for _ in range(3):
        layers = layout_order.initial_order(lg)
        for row in layers:
            rng.shuffle(row)
        pos = [0] * lg.n
        for row in layers:
            for i, v in enumerate(row):
                pos[v] = i
        assert counter.count(pos) == layout_order.total_crossings(layers, pos, lg.down) > 0


def test_dense_cyclic_graph_stays_bounded():
    """A random hairball layers very deep; the longest edges go straight, no blow-up."""
    g = nx.gnp_random_graph(300, 0.03, seed=2, directed=True)
    g.add_edges_from((v, v) for v in range(0, 300, 50))
    n, e = g.number_of_nodes(), g.number_of_edges()
    lay = layered_layout(g)
    _check(g, lay)
    bends = sum(len(p) - 2 for (u, v), p in lay.edge_points.items() if u != v)
    assert bends <= layout_layers.dummy_budget(n, e)
    assert any(len(p) == 2 and abs(lay.layers[u] - lay.layers[v]) > 1
               for (u, v), p in lay.edge_points.items())


def test_many_components_keep_their_own_order_and_rows():
    g = nx.disjoint_union_all([nx.balanced_tree(2, 3, nx.DiGraph)] * 30)
    lay = layered_layout(g)
    _check(g, lay)
    assert count_crossings(g, lay) == 0
    roots = sorted((lay.positions[v][0], v) for v in g if g.in_degree(v) == 0)
    assert [v for _, v in roots] == sorted(v for v in g if g.in_degree(v) == 0)


def test_feedback_edge_is_reversed_not_the_forward_chain():
    """A loop back to the input keeps the input on top (greedy feedback arc set)."""
    g = nx.DiGraph([("x", "a"), ("a", "b"), ("b", "c"), ("x", "c"), ("w", "a"), ("c", "x")])
    lay = layered_layout(g)
    assert lay.layers["x"] == 0 and lay.layers["c"] == max(lay.layers.values())
    assert not layout_layers.break_cycles(3, [(0, 1), (1, 2), (0, 2)]).count(True)


def _benchmark_module():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[3] / "benchmarks" / "gui_scale.py"
    spec = importlib.util.spec_from_file_location("gui_scale_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_benchmark_layout_section_runs(capsys):
    bench = _benchmark_module()
    assert bench.main(["--section", "layout", "--sizes", "150", "--repeat", "1", "--no-dot",
                       "--json"]) == 0
    import json
    rows = json.loads(capsys.readouterr().out)["layout"]
    assert rows[0]["nodes"] == 150 and rows[0]["crossings"] >= 0
    g = bench.layered_dag(300, seed=1)
    assert g.number_of_nodes() == 300 and nx.is_directed_acyclic_graph(g)


@pytest.mark.skipif(__import__("shutil").which("dot") is None, reason="Graphviz dot not on PATH")
def test_dot_layouts_are_read_back_and_counted():
    bench = _benchmark_module()
    g = bench.layered_dag(120, seed=2)
    dl, _ = bench.dot_layout(g, timeout=60)
    assert set(dl.layers) == set(g.nodes)
    assert all(dl.layers[u] < dl.layers[v] for u, v in g.edges)
    assert count_crossings(g, dl) >= 0


def test_garbage_collector_is_restored_even_after_an_error():
    import gc
    assert gc.isenabled()
    layered_layout(_dag(50))
    with pytest.raises(ValueError):
        layered_layout(nx.DiGraph([(0, 1)]), {0: (-1.0, 1.0)})
    assert gc.isenabled()


@pytest.mark.parametrize("reverse", [False, True])
def test_vector_transposition_keeps_layers_consistent_and_helps(reverse):
    from tensorscope.ui.model.layout_vector import VectorTransposer
    g = _dag(400, seed=9)
    g.add_edges_from([("p", "q"), ("p", "r")])          # a second component
    lg = _layered(g)
    layers = layout_order.initial_order(lg)
    members = [sorted(row) for row in layers]
    pos = [0] * lg.n
    for row in layers:
        for i, v in enumerate(row):
            pos[v] = i
    counter = layout_order.CrossingCounter(lg)
    before = counter.count(pos)
    VectorTransposer(lg, layers).transpose(layers, pos, reverse, 3)
    assert [sorted(row) for row in layers] == members
    assert all(pos[v] == i for row in layers for i, v in enumerate(row))
    for row in layers:      # components stay in contiguous blocks
        comps = [lg.comp[v] for v in row]
        assert comps == sorted(comps)
    assert counter.count(pos) < before


class _Stop(Exception):
    """What the test's ``check`` raises to stop a layout."""


def _checks_of(g: nx.DiGraph, **kw) -> list[str]:
    """The functions ``check`` was called from, in order, over one whole layout."""
    import sys
    calls: list[str] = []
    layered_layout(g, check=lambda: calls.append(sys._getframe(1).f_code.co_name), **kw)
    return calls


@pytest.mark.parametrize("n", [300, 2000])   # plain and vectorised transposition
def test_layout_calls_check_in_every_long_stage(n):
    from tensorscope.ui.model.layout_coords import PASSES
    g = _dag(n, seed=4)
    callers = _checks_of(g)
    # between stages, each crossing-reduction iteration, each transposition round
    # (plain or vectorised) and each coordinate pass
    assert {"_layered_layout", "_search", "transpose", "assign_x"} <= set(callers)
    assert callers.count("assign_x") >= len(PASSES)
    seeded = _checks_of(g, previous=layered_layout(g))   # a seeded re-layout too
    assert {"_search", "transpose", "assign_x"} <= set(seeded)


def test_a_check_that_raises_stops_the_layout_at_any_checkpoint():
    import gc
    g = _dag(600, seed=5)
    total = len(_checks_of(g))
    assert total > 10
    for stop_at in (1, 2, total // 2, total):
        seen = [0]

        def check(seen: list[int] = seen, stop_at: int = stop_at) -> None:
            seen[0] += 1
            if seen[0] == stop_at:
                raise _Stop

        with pytest.raises(_Stop):
            layered_layout(g, check=check)
        assert seen[0] == stop_at     # nothing ran on to another checkpoint
        assert gc.isenabled()


def test_a_check_that_never_raises_changes_nothing():
    g = _dag(700, seed=6)
    plain, checked = layered_layout(g), layered_layout(g, check=lambda: None)
    assert plain.positions == checked.positions
    assert plain.edge_points == checked.edge_points
