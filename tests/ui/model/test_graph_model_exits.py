"""An expanded container whose own ops made its output: edges leave from its exits."""
from __future__ import annotations

from typing import Any

from tensorscope.common.events import GraphStructure
from tensorscope.ui.model.graph_model import GraphModel, group_id


def _call(i: int, path: str, parent: int | None, **extra: Any) -> dict[str, Any]:
    return {"id": f"c{i}", "kind": "call", "label": "M", "root": 0, "path": path, "call": i,
            "parent": None if parent is None else f"c{parent}", "shape": [2, 4],
            "dtype": "float32", "device": "cpu", **extra}


def _resnet() -> GraphStructure:
    """stem -> block(conv, bn; out = bn + stem) -> head, as the hooks build it."""
    nodes = [{"id": "in0", "kind": "input", "label": "in[0]", "root": 0, "path": "",
              "call": None, "parent": None, "shape": [2, 3], "dtype": "float32",
              "device": "cpu"},
             _call(0, "", None), _call(1, "stem", 0),
             _call(2, "block", 0, exits=["c4", "c1"]),
             _call(3, "block.conv", 2), _call(4, "block.bn", 2), _call(5, "head", 0)]
    edges = [["in0", "c0", [2, 3]], ["in0", "c1", [2, 3]], ["c1", "c2", [2, 4]],
             ["c1", "c3", [2, 4]], ["c3", "c4", [2, 4]], ["c2", "c5", [2, 4]]]
    return GraphStructure(kind="module", hash="resnet", nodes=nodes, edges=edges)


def test_expanded_block_feeds_the_consumer_from_its_exits() -> None:
    g = GraphModel("module")
    g.set_structure(_resnet(), budget=None)
    vis = g.visible_graph()
    assert "c2" not in vis  # the block's own call is hidden when expanded
    assert vis.has_edge("c4", "c5") and vis.has_edge("c1", "c5")
    assert vis.has_edge("c1", "c3")


def test_collapsed_block_is_the_only_source_of_its_consumer() -> None:
    g = GraphModel("module")
    g.set_structure(_resnet(), budget=None)
    g.collapse((0, "block"))
    vis = g.visible_graph()
    block = group_id((0, "block"))
    assert vis.has_edge(block, "c5") and vis.has_edge("c1", block)
    assert not vis.has_edge("c1", "c5")  # the skip stays inside the collapsed block


def _gpt2_block() -> GraphStructure:
    """wte -> h.0(ln_1 -> attn) -> head, with position ids handed to h.0 and to its attn."""
    nodes = [{"id": "in0", "kind": "input", "label": "in[0]", "root": 0, "path": "",
              "call": None, "parent": None, "shape": [2, 3], "dtype": "int64",
              "device": "cpu"},
             {"id": "pos", "kind": "input", "label": "in[0]", "root": 0, "path": "wpe",
              "call": None, "parent": None, "shape": [1, 3], "dtype": "int64",
              "device": "cpu"},
             _call(0, "", None), _call(1, "wte", 0), _call(2, "h.0", 0),
             _call(3, "h.0.ln_1", 2), _call(4, "h.0.attn", 2), _call(5, "head", 0)]
    edges = [["in0", "c0", [2, 3]], ["in0", "c1", [2, 3]], ["c1", "c2", [2, 4]],
             ["pos", "c2", [1, 3]], ["c1", "c3", [2, 4]], ["c3", "c4", [2, 4]],
             ["pos", "c4", [1, 3]], ["c2", "c5", [2, 4]]]
    return GraphStructure(kind="module", hash="gpt2", nodes=nodes, edges=edges)


def test_a_tensor_fed_to_a_block_and_to_its_layer_goes_only_to_the_layer() -> None:
    g = GraphModel("module")
    g.set_structure(_gpt2_block(), budget=None)
    vis = g.visible_graph()
    assert "c2" not in vis   # h.0 expanded
    assert vis.has_edge("pos", "c4")
    assert not vis.has_edge("pos", "c3")   # ln_1 never read the position ids
    assert vis.has_edge("c1", "c3")        # the stream still enters at ln_1


def test_a_tensor_no_layer_of_an_expanded_block_takes_is_drawn_into_none_of_them() -> None:
    """BERT's attention_mask, handed to BertModel and turned into the extended mask by
    plain ops, was drawn into the word and token-type embeddings (the model's first
    layers); GPT-2's position ids into an expanded attention's c_attn."""
    nodes = [{"id": "ids", "kind": "input", "label": 'in["input_ids"]', "root": 0, "path": "",
              "call": None, "parent": None, "shape": [2, 3], "dtype": "int64",
              "device": "cpu"},
             {"id": "mask", "kind": "input", "label": 'in["attention_mask"]', "root": 0,
              "path": "", "call": None, "parent": None, "shape": [2, 3], "dtype": "int64",
              "device": "cpu"},
             _call(0, "", None), _call(1, "bert", 0), _call(2, "bert.word", 1),
             _call(3, "bert.type", 1), _call(4, "bert.norm", 1), _call(5, "head", 0)]
    edges = [["ids", "c0", [2, 3]], ["mask", "c0", [2, 3]], ["ids", "c1", [2, 3]],
             ["mask", "c1", [2, 3]], ["ids", "c2", [2, 3]], ["ids", "c3", [2, 3]],
             ["c2", "c4", [2, 4]], ["c3", "c4", [2, 4]], ["c1", "c5", [2, 4]]]
    g = GraphModel("module")
    g.set_structure(GraphStructure(kind="module", hash="bert-mask", nodes=nodes, edges=edges),
                    budget=None)
    vis = g.visible_graph()
    assert "c1" not in vis                       # bert expanded
    assert not vis.has_edge("mask", "c2") and not vis.has_edge("mask", "c3")
    assert vis.has_edge("ids", "c2") and vis.has_edge("ids", "c3")
