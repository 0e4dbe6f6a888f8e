"""A folded block's dtype badge: 'mixed' only when the calls inside it differ."""
from __future__ import annotations

from sample_events import transformer_session
from tensorscope.ui.model.graph_model import GraphModel


def _folded_block(extra_dtype: str, kind: str) -> dict:
    graph = transformer_session(2)[-1]
    attn = next(n["id"] for n in graph.nodes if n.get("path") == "encoder.layers.0.self_attn")
    graph.nodes.append({"id": "buckets", "kind": kind, "label": "in[1]", "root": 0,
                        "path": "encoder.layers.0.self_attn", "shape": [128, 128],
                        "dtype": extra_dtype, "device": "cpu"})
    graph.edges.append(["buckets", attn, [128, 128]])
    model = GraphModel("module")
    model.set_structure(graph, budget=None)
    model.collapse((0, "encoder.layers.0"))
    nid = model.visible_for_module(0, "encoder.layers.0")
    attrs = model.visible_graph().nodes[nid]
    assert attrs["kind"] == "group"
    return attrs


def test_an_integer_input_inside_a_block_is_not_a_mixed_dtype():
    """T5's attention takes int64 position buckets: its float32 block read 'mixed',
    in the red of an error."""
    assert not _folded_block("int64", "input")["mixed_dtype"]


def test_calls_of_two_float_dtypes_inside_a_block_are_mixed():
    assert _folded_block("float16", "call")["mixed_dtype"]
