"""Tensors that feed many chained blocks (masks, position ids) become badges."""
from __future__ import annotations

from tensorscope.common.events import GraphStructure
from tensorscope.ui.model.graph_model import GraphModel, side_input_label


def _node(nid: str, kind: str = "call", path: str = "", label: str = "Block",
          shape=(2, 8, 16), dtype: str = "float32") -> dict:
    return {"id": nid, "kind": kind, "label": label, "root": 0, "path": path, "call": None,
            "parent": None, "shape": list(shape), "dtype": dtype, "device": "cpu"}


def _chain(blocks: int, mask_label: str = 'in["attention_mask"]') -> GraphStructure:
    nodes = [_node("in0", "input", label='in["input_ids"]', shape=(2, 8), dtype="int64"),
             _node("in1", "input", label=mask_label, shape=(2, 8), dtype="int64"),
             _node("e", path="embed", label="Embedding")]
    edges = [["in0", "e", [2, 8]]]
    prev = "e"
    for i in range(blocks):
        nid = f"b{i}"
        nodes.append(_node(nid, path=f"h.{i}"))
        edges += [[prev, nid, [2, 8, 16]], ["in1", nid, [2, 8]]]
        prev = nid
    return GraphStructure(kind="module", hash=f"chain{blocks}", nodes=nodes, edges=edges)


def test_a_mask_fed_to_every_block_is_a_badge_not_a_node() -> None:
    g = GraphModel("module")
    g.set_structure(_chain(6), budget=None)
    vis = g.visible_graph()
    assert "in1" not in vis and "in1" in vis.graph["side_inputs"]
    assert vis.graph["side_inputs"]["in1"]["consumers"] == [f"b{i}" for i in range(6)]
    for i in range(6):
        assert vis.nodes[f"b{i}"]["side_inputs"] == [
            {"id": "in1", "label": "attention_mask", "shape": [2, 8]}]
    assert "in0" in vis   # the tokens feed one module: an ordinary input


def test_parallel_branches_keep_their_edges() -> None:
    """An Inception block's input feeds four branches that do not feed one another."""
    nodes = [_node("in0", "input", label="in[0]")] + [
        _node(f"b{i}", path=f"branch{i}") for i in range(4)] + [_node("cat", path="head")]
    edges = [["in0", f"b{i}", [2]] for i in range(4)] + [[f"b{i}", "cat", [2]] for i in range(4)]
    g = GraphModel("module")
    g.set_structure(GraphStructure(kind="module", hash="inc", nodes=nodes, edges=edges),
                    budget=None)
    vis = g.visible_graph()
    assert "in0" in vis and vis.out_degree("in0") == 4
    assert not vis.graph["side_inputs"]


def test_two_blocks_are_not_enough_for_a_badge() -> None:
    g = GraphModel("module")
    g.set_structure(_chain(2), budget=None)
    assert "in1" in g.visible_graph()


def test_side_input_labels() -> None:
    assert side_input_label({"label": 'in["position_ids"]'}) == "position_ids"
    assert side_input_label({"label": "in[0]"}) == "side input"
    assert side_input_label({"label": "op result"}) == "side input"
    assert side_input_label({"label": "LlamaRotaryEmbedding", "kind": "call"}) \
        == "LlamaRotaryEmbedding"


def test_a_run_of_identical_blocks_folds_into_one_card_and_back() -> None:
    from tensorscope.ui.model.graph_model import group_id
    nodes = [_node("in0", "input", label='in["input_ids"]', shape=(2, 8), dtype="int64"),
             _node("e", path="embed", label="Embedding")]
    edges = [["in0", "e", [2, 8]]]
    prev = "e"
    for i in range(12):   # h.i is a container with one child: it folds into a group card
        nodes += [_node(f"b{i}", path=f"h.{i}", label="Block"),
                  _node(f"f{i}", path=f"h.{i}.fc", label="Linear")]
        nodes[-2]["parent"] = None
        nodes[-1]["parent"] = f"b{i}"
        edges += [[prev, f"b{i}", [2, 8, 16]], [prev, f"f{i}", [2, 8, 16]]]
        prev = f"b{i}"
    nodes.append(_node("head", path="head", label="Linear"))
    edges.append([prev, "head", [2, 8, 16]])
    g = GraphModel("module", type_of=lambda r, p: "Block" if p.startswith("h.") and
                   p.count(".") == 1 else "")
    g.set_structure(GraphStructure(kind="module", hash="blocks", nodes=nodes, edges=edges),
                    budget=None)
    for i in range(12):
        g.collapse((0, f"h.{i}"))
    assert group_id((0, "h.5")) in g.visible_graph()
    folded = g.copy()
    folded.fold_runs = True
    vis = folded.visible_graph()
    runs = [n for n, a in vis.nodes(data=True) if a.get("run")]
    assert len(runs) == 1
    run = vis.nodes[runs[0]]
    assert run["label"] == "Block ×12" and run["path"] == "h.0–11"
    assert vis.has_edge("e", runs[0]) and vis.has_edge(runs[0], "head")
    assert folded.visible_for_module(0, "h.7.fc") == runs[0]
    assert folded.module_of(runs[0]) == (0, "h.0")
    assert group_id((0, "h.5")) in g.visible_graph()   # the original keeps its cards


def test_a_mask_fed_to_layers_with_others_between_them_is_a_badge() -> None:
    """BERT's attention mask goes to each layer's attention, with the layer's
    intermediate and output between two of them: it stayed a node whose edges pulled
    each layer further right, a staircase off the view."""
    nodes = [_node("in0", "input", label='in["input_ids"]', shape=(2, 8), dtype="int64"),
             _node("mask", "input", label='in["attention_mask"]', shape=(2, 1, 8, 8)),
             _node("e", path="embed", label="Embedding")]
    edges = [["in0", "e", [2, 8]]]
    prev = "e"
    for i in range(4):
        parts = [f"a{i}", f"m{i}", f"o{i}"]
        for nid, part in zip(parts, ("attention", "intermediate", "output")):
            nodes.append(_node(nid, path=f"layer.{i}.{part}"))
        edges += [[prev, f"a{i}", [2, 8, 16]], [f"a{i}", f"m{i}", [2, 8, 16]],
                  [f"m{i}", f"o{i}", [2, 8, 16]], [f"a{i}", f"o{i}", [2, 8, 16]],
                  ["mask", f"a{i}", [2, 1, 8, 8]]]
        prev = f"o{i}"
    g = GraphModel("module")
    g.set_structure(GraphStructure(kind="module", hash="bert", nodes=nodes, edges=edges),
                    budget=None)
    vis = g.visible_graph()
    assert "mask" not in vis
    assert vis.graph["side_inputs"]["mask"]["consumers"] == [f"a{i}" for i in range(4)]
    assert vis.nodes["a2"]["side_inputs"][0]["label"] == "attention_mask"
