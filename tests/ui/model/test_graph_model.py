"""GraphModel: container collapse/expand and the visible graph (no Qt)."""
from __future__ import annotations

import pytest

from sample_events import mlp_autograd_graph, mlp_module_graph, transformer_session
from tensorscope.ui.model.graph_model import GraphModel, group_id


def _transformer_model(budget=40):
    _hello, tree, graph = transformer_session(12)
    types = {m["path"]: m["type"] for m in tree.roots[0]["modules"]}
    g = GraphModel("module", type_of=lambda r, p: types.get(p, ""))
    g.set_structure(graph, budget=budget)
    return g


def test_default_collapse_keeps_a_12_layer_transformer_readable():
    g = _transformer_model()
    vis = g.visible_graph()
    groups = [n for n, a in vis.nodes(data=True) if a["kind"] == "group"]
    assert len(groups) == 12
    assert vis.number_of_nodes() <= 40
    assert vis.nodes[group_id((0, "encoder.layers.0"))]["label"] == "TransformerEncoderLayer"
    assert vis.nodes[group_id((0, "encoder.layers.0"))]["shape"] == [8, 128, 256]


def test_collapse_and_expand_change_visible_node_count():
    g = _transformer_model()
    before = g.visible_graph().number_of_nodes()
    g.expand((0, "encoder.layers.3"))
    assert g.visible_graph().number_of_nodes() == before + 5
    g.collapse((0, "encoder"))
    assert g.visible_graph().number_of_nodes() < before
    g.expand_all()
    assert g.visible_graph().number_of_nodes() == g.full.number_of_nodes()


def test_visible_edges_are_remapped_without_self_loops():
    g = _transformer_model()
    vis = g.visible_graph()
    assert not any(u == v for u, v in vis.edges)
    a, b = group_id((0, "encoder.layers.0")), group_id((0, "encoder.layers.1"))
    assert vis.has_edge(a, b)


def test_module_lookups():
    g = _transformer_model()
    assert g.visible_for_module(0, "encoder.layers.2.linear1") == group_id((0, "encoder.layers.2"))
    g.expand((0, "encoder.layers.2"))
    nid = g.visible_for_module(0, "encoder.layers.2.linear1")
    assert g.module_of(nid) == (0, "encoder.layers.2.linear1")
    assert g.group_of(nid) == (0, "encoder.layers.2")


def test_mlp_module_graph_hides_expanded_container_calls():
    g = GraphModel("module")
    g.set_structure(mlp_module_graph())
    vis = g.visible_graph()
    # 2 inputs, 5 layers, the loss, the output; Classifier/Sequential calls hidden
    assert vis.number_of_nodes() == 9
    assert {a.get("label") for _n, a in vis.nodes(data=True)} >= {"Linear", "CrossEntropyLoss"}
    assert "Sequential" not in {a.get("label") for _n, a in vis.nodes(data=True)}
    g.collapse((0, "network"))
    vis = g.visible_graph()
    assert vis.number_of_nodes() == 5
    assert vis.nodes[group_id((0, "network"))]["shape"] == [64, 10]
    assert vis.has_edge(group_id((0, "network")), "closs")
    g.collapse((0, ""))
    assert g.visible_graph().number_of_nodes() == 5   # root group replaces network group


def test_autograd_ops_group_by_module():
    g = GraphModel("autograd")
    g.set_structure(mlp_autograd_graph(), budget=None)
    full = g.visible_graph().number_of_nodes()
    g.collapse((0, "network.0"))
    assert g.visible_graph().number_of_nodes() == full - 2   # op + 2 params → 1
    assert set(g.nodes_for_module(0, "network.0")) == {group_id((0, "network.0"))}


def _block_graph():
    from tensorscope.common.events import GraphStructure
    call = lambda i, path: {"id": i, "kind": "call", "label": "M", "root": 0, "path": path,
                            "shape": [2], "dtype": "float32", "device": "cpu"}
    nodes = [{"id": "in0", "kind": "input", "label": "in[0]", "root": 0, "path": ""},
             {"id": "in1", "kind": "input", "label": "in[0]", "root": 0, "path": ""},
             call("croot", ""), call("cblk", "blk"), call("ca", "blk.a"), call("cb", "blk.b"),
             call("chead", "head")]
    edges = [["in0", "croot", [2]], ["in0", "cblk", [2]], ["in0", "ca", [2]],
             ["in1", "cb", [2]], ["cb", "chead", [2]]]
    return GraphStructure(kind="module", hash="blk", nodes=nodes, edges=edges)


def test_inputs_made_inside_a_block_fold_with_it():
    g = GraphModel("module")
    g.set_structure(_block_graph(), budget=None)
    vis = g.visible_graph()
    assert vis.nodes["in1"]["label"] == "op result"      # a residual add, say
    assert vis.has_edge("in0", "ca")
    g.collapse((0, "blk"))
    vis = g.visible_graph()
    assert "in1" not in vis and group_id((0, "blk")) in vis
    assert vis.has_edge("in0", group_id((0, "blk")))
    assert vis.has_edge(group_id((0, "blk")), "chead")


def test_expanding_through_single_child_containers():
    from tensorscope.common.events import GraphStructure
    nodes = [{"id": f"c{i}", "kind": "call", "label": "Linear", "root": 0,
              "path": f"blocks.{i // 4}.sub.m{i % 4}"} for i in range(8)]
    edges = [[f"c{i}", f"c{i + 1}", [1]] for i in range(7)]
    g = GraphModel("module")
    g.set_structure(GraphStructure(kind="module", hash="s", nodes=nodes, edges=edges), budget=None)
    g.collapse((0, "blocks.0"))
    g.collapse((0, "blocks.0.sub"))
    n = g.visible_count()
    g.expand((0, "blocks.0"), through_single=True)
    assert (0, "blocks.0.sub") not in g.collapsed
    assert g.visible_count() == n + 3


class _Stop(Exception):
    """What the test's ``check`` raises."""


def test_a_check_that_raises_stops_the_visible_graph_and_the_default_folding():
    gs = next(m for m in transformer_session(200) if type(m).__name__ == "GraphStructure")
    calls = {"n": 0, "stop_at": None}

    def check() -> None:
        calls["n"] += 1
        if calls["n"] == calls["stop_at"]:
            raise _Stop

    model = GraphModel("module", check=check)
    model.set_structure(gs, budget=None)
    model.expand_all()
    model.visible_graph()
    per_graph = calls["n"]
    assert per_graph >= 2   # 1,200 nodes and edges: checked inside the loops
    for stop_at in (1, per_graph):
        fresh = model.copy()
        calls.update(n=0, stop_at=stop_at)
        with pytest.raises(_Stop):
            fresh.visible_graph()
        calls.update(stop_at=None)
        assert fresh.visible_graph().number_of_nodes() == model.visible_graph().number_of_nodes()
    calls.update(n=0, stop_at=1)
    with pytest.raises(_Stop):
        model.collapse_to_budget()
