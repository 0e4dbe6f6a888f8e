"""Graphs of the models people train, as the GUI folds them: GPT-2 reads as a chain of
blocks with its position ids as a side input, ResNet's in-place residual has both edges.

Plain-PyTorch copies of the shapes run in the core suite; the transformers models
(random weights from config classes, no downloads) run when transformers is installed.
"""
from __future__ import annotations

import os
import sys

import networkx as nx
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
from real_models import captured  # noqa: E402

from tensorscope.ui.model.graph_model import GraphModel, group_id  # noqa: E402


def _default_view(name: str) -> tuple[GraphModel, nx.DiGraph]:
    sink = captured(name, steps=2)
    g = GraphModel("module", type_of=lambda r, p: sink.types.get((r, p), ""))
    g.set_structure(sink.graphs["module"])
    return g, g.visible_graph()


def _chain_of_blocks(vis: nx.DiGraph, blocks: list[str]) -> None:
    ids = [group_id((0, b)) for b in blocks]
    assert all(i in vis for i in ids), sorted(vis.nodes)
    for a, b in zip(ids, ids[1:]):
        assert vis.has_edge(a, b)
        assert vis.in_degree(b) == 1       # nothing else fans into a block
    assert max(d for _n, d in vis.out_degree()) <= 2   # no fan-out node warps the layout


def _check_gpt(name: str, prefix: str) -> None:
    _g, vis = _default_view(name)
    _chain_of_blocks(vis, [f"{prefix}h.{i}" for i in range(12)])
    side = vis.graph["side_inputs"]
    assert len(side) == 1
    consumers = next(iter(side.values()))["consumers"]
    assert {group_id((0, f"{prefix}h.{i}")) for i in range(12)} <= set(consumers)
    assert all(vis.nodes[group_id((0, f"{prefix}h.{i}"))]["side_inputs"] for i in range(12))


def _check_resnet(name: str, block: str, parts: tuple[str, str, str]) -> None:
    g, _vis = _default_view(name)
    g.expand_all()
    vis = g.visible_graph()
    by_path = {a.get("path"): n for n, a in vis.nodes(data=True) if a.get("kind") == "call"}
    layer_end, shortcut_end, activation = (by_path[f"{block}.{p}"] for p in parts)
    assert vis.has_edge(layer_end, activation) and vis.has_edge(shortcut_end, activation)


def test_plain_gpt2_shape_is_a_chain_with_a_side_input():
    _check_gpt("gpt2_plain", "")


def test_plain_resnet_in_place_residual_has_both_edges():
    _check_resnet("resnet_plain", "stages.1.0", ("layer.8", "shortcut.1", "activation"))


def test_transformers_gpt2_is_a_chain_with_a_side_input():
    pytest.importorskip("transformers")
    _check_gpt("gpt2", "transformer.")


def test_transformers_resnet_shortcut_feeds_the_residual_add():
    pytest.importorskip("transformers")
    _check_resnet("resnet50", "resnet.encoder.stages.1.layers.0",
                  ("layer.2.activation", "shortcut.normalization", "activation"))
