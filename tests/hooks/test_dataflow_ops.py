"""The module graph links calls through plain tensor ops between them."""
from __future__ import annotations

from typing import Any

import torch
from hooks_zoo import Encoder, Residual, watch
from torch import nn


class SkipNet(nn.Module):
    """stem -> (h + body(h)) -> head, the add in the parent's forward."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.body = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(),
                                  nn.Conv2d(4, 4, 3, padding=1))
        self.head = nn.Conv2d(4, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.stem(x))
        return self.head(h + self.body(h))


class ResNetLike(nn.Module):
    """stem, two residual blocks, pooling, a functional flatten, a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.block1 = Residual(4)
        self.block2 = Residual(4)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.block2(self.block1(torch.relu(self.stem(x))))
        return self.fc(torch.flatten(self.pool(h), 1))


class FlatMLP(nn.Module):
    """An MLP that flattens its image input with ``torch.flatten`` in forward."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(12, 8)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(torch.flatten(x, 1))))


def _graph(model: nn.Module, *args: Any, steps: int = 2, no_grad: bool = False) -> Any:
    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    w, log = watch(model, opt)
    with w:
        for _ in range(steps):
            if no_grad:
                with torch.no_grad():
                    model(*args)
                w.step()
                continue
            opt.zero_grad()
            model(*args).pow(2).mean().backward()
            opt.step()
    graphs = log.graphs("module")
    assert graphs, "no module graph emitted"
    return graphs


def _parts(graph: Any) -> tuple[dict[str, str], set[tuple[str, str]], list[dict[str, Any]]]:
    ids = {n["path"]: n["id"] for n in graph.nodes if n["kind"] == "call"}
    edges = {(a, b) for a, b, _ in graph.edges}
    inputs = [n for n in graph.nodes if n["kind"] == "input"]
    return ids, edges, inputs


def _well_formed(graph: Any) -> None:
    known = {n["id"] for n in graph.nodes}
    assert all(a in known and b in known for a, b, _ in graph.edges)
    used = {a for a, _, _ in graph.edges}
    assert all(n["id"] in used for n in graph.nodes if n["kind"] == "input")


def test_residual_add_in_parent_links_stem_to_body_and_head() -> None:
    graphs = _graph(SkipNet(), torch.randn(2, 3, 5, 5))
    assert len(graphs) == 1  # same structure every step: emitted once
    ids, edges, inputs = _parts(graphs[0])
    _well_formed(graphs[0])
    assert [n["id"] for n in inputs] == ["in0"]  # no dangling "op result"
    assert (ids["stem"], ids["body.0"]) in edges   # the conv path
    assert (ids["stem"], ids["head"]) in edges     # the skip, through the add
    assert (ids["body.2"], ids["head"]) in edges
    label = {(a, b): s for a, b, s in graphs[0].edges}
    assert label[(ids["stem"], ids["head"])] == [2, 4, 5, 5]


def test_residual_block_root_has_one_input_and_a_connected_conv_path() -> None:
    graphs = _graph(Residual(4), torch.randn(2, 4, 5, 5))
    ids, edges, inputs = _parts(graphs[0])
    _well_formed(graphs[0])
    assert [n["id"] for n in inputs] == ["in0"]
    assert {("in0", ids[""]), ("in0", ids["conv1"]), (ids["conv1"], ids["conv2"]),
            (ids["conv2"], ids["bn"])} <= edges


def test_resnet_like_chain_has_no_dangling_inputs() -> None:
    graphs = _graph(ResNetLike(), torch.randn(2, 3, 6, 6))
    ids, edges, inputs = _parts(graphs[0])
    _well_formed(graphs[0])
    assert len(inputs) == 1
    chain = [("stem", "block1"), ("stem", "block1.conv1"), ("block1", "block2"),
             ("block1.conv1", "block1.conv2"), ("block2", "pool"), ("pool", "fc")]
    assert {(ids[a], ids[b]) for a, b in chain} <= edges


def test_transformer_layers_chain_and_one_connected_mask() -> None:
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[1, 3:] = True
    graphs = _graph(Encoder(), torch.randn(2, 5, 16), mask)
    assert len(graphs) == 1
    graph = graphs[0]
    ids, edges, inputs = _parts(graph)
    _well_formed(graph)
    assert sorted(n["shape"] for n in inputs) == [[2, 5], [2, 5, 16]]
    (mask_node,) = [n["id"] for n in inputs if n["shape"] == [2, 5]]
    for path in ["", "encoder", "encoder.layers.0", "encoder.layers.0.self_attn",
                 "encoder.layers.1", "encoder.layers.1.self_attn"]:
        assert (mask_node, ids[path]) in edges, path
    layer = "encoder.layers.{}.{}".format
    for i in (0, 1):
        assert {(ids[layer(i, "dropout1")], ids[layer(i, "norm1")]),
                (ids[layer(i, "linear1")], ids[layer(i, "dropout")]),
                (ids[layer(i, "dropout2")], ids[layer(i, "norm2")])} <= edges
    assert (ids[layer(0, "norm2")], ids["encoder.layers.1"]) in edges
    assert (ids[layer(0, "norm2")], ids[layer(1, "norm1")]) in edges  # residual
    assert (ids[layer(1, "norm2")], ids["head"]) in edges             # through the mean


def test_functional_flatten_in_mlp_is_connected() -> None:
    graphs = _graph(FlatMLP(), torch.randn(2, 3, 4))
    ids, edges, inputs = _parts(graphs[0])
    _well_formed(graphs[0])
    assert [n["id"] for n in inputs] == ["in0"]
    assert {("in0", ids["fc1"]), (ids["fc1"], ids["fc2"])} <= edges


def test_no_grad_inference_keeps_identity_links() -> None:
    graphs = _graph(SkipNet(), torch.randn(2, 3, 5, 5), no_grad=True)
    ids, edges, inputs = _parts(graphs[0])
    assert len(inputs) > 1  # untraceable: the op result stays an input
    assert (ids["stem"], ids["head"]) not in edges


class TokenEncoder(nn.Module):
    """Tokens in, the padding mask built from them inside forward."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 16, padding_idx=0)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(16, 3)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.encoder(self.embed(tokens), src_key_padding_mask=tokens == 0)
        return self.head(x.mean(dim=1))


def test_mask_built_in_forward_is_one_input_fed_to_every_layer() -> None:
    tokens = torch.randint(1, 10, (2, 5))
    tokens[1, 3:] = 0
    graph = _graph(TokenEncoder(), tokens)[0]
    ids, edges, inputs = _parts(graph)
    _well_formed(graph)
    masks = [n for n in inputs if n["label"] == 'in["src_key_padding_mask"]']
    assert len(inputs) == 2 and len(masks) == 1
    for path in ["encoder", "encoder.layers.0", "encoder.layers.1",
                 "encoder.layers.0.self_attn", "encoder.layers.1.self_attn"]:
        assert (masks[0]["id"], ids[path]) in edges, path
    assert (ids["embed"], ids["encoder.layers.0"]) in edges


def test_graphs_are_built_once_for_a_model_with_none_and_flag_arguments(monkeypatch) -> None:
    import tensorscope.hooks.watch_events as watch_events
    builds: list[int] = []
    real = watch_events.module_graph

    def counted(step: Any, *args: Any) -> Any:
        builds.append(step.index)
        return real(step, *args)

    monkeypatch.setattr(watch_events, "module_graph", counted)
    mask = torch.zeros(2, 5, dtype=torch.bool)
    _graph(Encoder(), torch.randn(2, 5, 16), mask, steps=3)  # layers get src_mask=None
    assert len(builds) == 1


def test_residual_blocks_name_what_feeds_their_own_output() -> None:
    graph = _graph(ResNetLike(), torch.randn(2, 3, 6, 6))[0]
    ids, _, _ = _parts(graph)
    exits = {n["path"]: n.get("exits") for n in graph.nodes if n["kind"] == "call"}
    assert exits["block1"] == [ids["block1.bn"], ids["stem"]]   # bn(..) + x, x from stem
    assert exits["block2"] == [ids["block2.bn"], ids["block1"]]
    assert exits["stem"] is None and exits[""] is None          # output made by a child


class InPlaceBottleneck(nn.Module):
    """``out = layer(x); out += shortcut(x); act(out)`` (HF ResNet's layer, plain torch)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Sequential(nn.Conv2d(4, 8, 1), nn.BatchNorm2d(8), nn.Identity())
        self.shortcut = nn.Sequential(nn.Conv2d(4, 8, 1), nn.BatchNorm2d(8))
        self.activation = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.layer(x)
        out += self.shortcut(x)
        return self.activation(out)


def test_in_place_residual_add_feeds_its_reader_from_both_sides() -> None:
    """The reader of ``out += shortcut`` gets edges from the layer and the shortcut
    (the version counter says the tensor changed after its producer made it)."""
    graphs = _graph(InPlaceBottleneck(), torch.randn(2, 4, 3, 3))
    ids, edges, _inputs = _parts(graphs[0])
    _well_formed(graphs[0])
    act = ids["activation"]
    assert (ids["layer.2"], act) in edges
    assert (ids["shortcut.1"], act) in edges
    assert (ids["shortcut.0"], ids["shortcut.1"]) in edges


def test_in_place_add_belongs_to_the_block_not_to_the_layer_it_changed() -> None:
    """The autograd ops of ``out += shortcut`` are the block's own, and the shortcut's
    ops stay the shortcut's (the changed tensor's new autograd node is not its producer's)."""
    model = InPlaceBottleneck()
    torch.manual_seed(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    w, log = watch(model, opt)
    with w:
        for _ in range(2):
            opt.zero_grad()
            model(torch.randn(2, 4, 3, 3)).pow(2).mean().backward()
            opt.step()
    graph = log.graphs("autograd")[0]
    owner = {n["label"]: n.get("module") for n in graph.nodes if n["kind"] == "op"}
    assert owner["AddBackward0"] == ""
    modules = [n.get("module") for n in graph.nodes
               if n["kind"] == "op" and n["label"] == "ConvolutionBackward0"]
    assert sorted(modules) == ["layer.0", "shortcut.0"]
