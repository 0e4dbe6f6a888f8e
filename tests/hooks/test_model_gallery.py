"""A gallery of models checked against known paths, calls, shapes and attribution."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from hooks_zoo import (Broken, Classifier, ConvNet, DictNet, Encoder, EventLog, InplaceNet,
                       Recurrent, Residual, Twice, train_steps, watch)
from tensorscope.common.events import Finding
from tensorscope.hooks.watch_events import CAUGHT_NOTE, ESCAPED_NOTE


def _by_path(log: EventLog, step: int = 0) -> dict[tuple[int, str], list]:
    out: dict[tuple[int, str], list] = {}
    for d in log.digests(step):
        out.setdefault((d.root, d.path), []).append(d)
    return out


def _out(d, path="out"):
    return next(m for m in d.outputs if m["path"] == path)


def test_mlp_classifier_paths_shapes_stats_grads_and_attribution():
    torch.manual_seed(0)
    model, loss_fn = Classifier(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))
    w, log = watch([model, loss_fn], opt)
    with w:
        losses = train_steps(model, opt, [(x, y), (x, y)], loss_fn)
    by = _by_path(log)
    assert [d.path for d in log.digests(0)] == ["", "network", "network.0", "network.1",
                                                "network.2", "network.3", "network.4", ""]
    assert [d.index for d in log.digests(0)] == list(range(8))
    assert by[(0, "network.0")][0].inputs[0]["shape"] == [64, 784]
    assert _out(by[(0, "network.0")][0])["shape"] == [64, 128]
    assert _out(by[(0, "network.4")][0])["shape"] == [64, 10]
    assert _out(by[(0, "network.4")][0])["dtype"] == "float32"
    assert by[(1, "")][0].type == "CrossEntropyLoss" and by[(1, "")][0].inputs[1]["dtype"] == "int64"
    stats = by[(0, "network.1")][0].stats  # ReLU output: exact values known from the tensor
    assert stats is not None and stats["min"] == 0.0 and stats["nan"] == 0
    assert 0.3 < stats["zero_fraction"] < 0.7
    assert all(d.grad_norm is not None and d.grad_norm > 0 for d in log.digests(0))
    s0, s1 = log.summaries()
    assert s0.kind == "train" and s0.loss == losses[0] and s1.loss == losses[1]
    names = {p["name"]: p for p in s0.params}
    assert set(names) == {f"network.{i}.{k}" for i in (0, 2, 4) for k in ("weight", "bias")}
    assert names["network.0.weight"]["in_optimizer"] and names["network.0.weight"]["module"] == "network.0"
    assert names["network.0.weight"]["grad_norm"] > 0 and names["network.0.weight"]["update_ratio"] > 0
    graph = log.graphs("autograd")[0]
    ops = {(n["label"], n.get("module")) for n in graph.nodes if n["kind"] == "op"}
    assert ("AddmmBackward0", "network.0") in ops and ("AddmmBackward0", "network.4") in ops
    assert ("ReluBackward0", "network.1") in ops and ("NllLossBackward0", "") in ops
    params = {n["param"] for n in graph.nodes if n["kind"] == "param"}
    assert params == set(names)


def test_cnn_with_batchnorm_and_dropout():
    torch.manual_seed(0)
    model = ConvNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    w, log = watch(model, opt)
    with w:
        train_steps(model, opt, [(torch.randn(4, 3, 16, 16), torch.randint(0, 5, (4,)))])
    by = _by_path(log)
    assert _out(by[(0, "features.0")][0])["shape"] == [4, 8, 16, 16]
    assert _out(by[(0, "features.1")][0])["shape"] == [4, 8, 16, 16]
    assert _out(by[(0, "features.3")][0])["shape"] == [4, 8, 8, 8]
    assert _out(by[(0, "dropout")][0])["shape"] == [4, 512]
    assert by[(0, "dropout")][0].training is True
    assert by[(0, "features.1")][0].stats["mean"] == pytest.approx(0.0, abs=1e-5)
    assert log.summaries()[0].loss is not None  # CrossEntropyLoss outside: no root, scalar backward


def test_residual_block_attributes_the_add_to_the_block():
    torch.manual_seed(0)
    model = Residual()
    w, log = watch(model)
    with w:
        model(torch.randn(2, 4, 5, 5, requires_grad=True)).sum().backward()
        w.step()
    graph = log.graphs("autograd")[0]
    owner = {n["label"]: n.get("module") for n in graph.nodes if n["kind"] == "op"}
    assert owner["AddBackward0"] == "" and owner["NativeBatchNormBackward0"] == "bn"
    convs = sorted(n.get("module") for n in graph.nodes if n["label"] == "ConvolutionBackward0")
    assert convs == ["conv1", "conv2"]
    leaf = [n for n in graph.nodes if n["kind"] == "leaf"]
    assert len(leaf) == 1 and leaf[0]["label"] == "leaf [2, 4, 5, 5]"
    flow = log.graphs("module")[0]
    edges = {(a, b) for a, b, _ in flow.edges}
    ids = {n["path"]: n["id"] for n in flow.nodes if n["kind"] == "call"}
    assert (ids["conv2"], ids["bn"]) in edges and ("in0", ids["conv1"]) in edges


def test_transformer_encoder_with_padding_mask():
    torch.manual_seed(0)
    model = Encoder()
    mask = torch.zeros(2, 7, dtype=torch.bool)
    mask[1, 5:] = True
    w, log = watch(model)
    with w:
        model(torch.randn(2, 7, 16), mask).sum().backward()
        w.step()
    by = _by_path(log)
    enc = by[(0, "encoder")][0]
    assert [m["path"] for m in enc.inputs] == ["in[0]", 'in["src_key_padding_mask"]']
    assert enc.inputs[1]["dtype"] == "bool" and enc.inputs[1]["shape"] == [2, 7]
    assert (0, "encoder.layers.1.self_attn") in by and (0, "encoder.layers.0.linear1") in by
    attn = by[(0, "encoder.layers.0.self_attn")][0]
    assert _out(attn, "out[0]")["shape"] == [2, 7, 16] and _out(attn, "out[1]")["kind"] == "none"
    assert all(d.finite for d in log.digests(0))


def test_lstm_tuple_outputs_and_state():
    torch.manual_seed(0)
    model = Recurrent()
    w, log = watch(model)
    with w:
        model(torch.randn(3, 4, 6)).sum().backward()
        w.step()
    lstm = _by_path(log)[(0, "lstm")][0]
    assert [m["path"] for m in lstm.outputs] == ["out[0]", "out[1][0]", "out[1][1]"]
    assert [m["shape"] for m in lstm.outputs] == [[3, 4, 5], [1, 3, 5], [1, 3, 5]]
    assert lstm.grad_norm is not None and lstm.grad_norm > 0


def test_dict_outputs_and_loss_from_a_scalar_output():
    torch.manual_seed(0)
    model = DictNet()
    w, log = watch(model)
    x, y = torch.randn(5, 4), torch.randint(0, 3, (5,))
    with w:
        out = model(x, y)
        out["loss"].backward()
        w.step()
    d = log.digests(0)[0]
    paths = {m["path"]: m for m in d.outputs}
    assert paths['out["logits"]']["shape"] == [5, 3]
    assert paths['out["extra"].logits']["shape"] == [5, 3]
    assert paths['out["extra"].hidden']["kind"] == "none"
    assert paths['out["n"]']["kind"] == "object" and paths['out["n"]']["dtype"] == "int"
    assert log.summaries()[0].loss == out["loss"].item()


def test_module_called_twice_gives_two_calls():
    model = Twice()
    w, log = watch(model)
    with w:
        model(torch.randn(2, 4)).sum().backward()
        w.step()
    calls = [d for d in log.digests(0) if d.path == "shared"]
    assert len(calls) == 2 and calls[0].index != calls[1].index
    assert all(c.grad_norm is not None for c in calls)
    graph = log.graphs("autograd")[0]
    addmm = [n for n in graph.nodes if n["label"] == "AddmmBackward0"]
    assert sorted(n["call"] for n in addmm) == sorted(c.index for c in calls)


def test_inplace_relu_trains_and_keeps_gradients():
    torch.manual_seed(0)
    plain = InplaceNet()
    model = InplaceNet()
    model.load_state_dict(plain.state_dict())
    batches = [(torch.randn(6, 4), torch.randint(0, 2, (6,))) for _ in range(3)]
    want = train_steps(plain, torch.optim.SGD(plain.parameters(), lr=0.1), batches)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, log = watch(model, opt, mode="full")
    with w:
        got = train_steps(model, opt, batches)
    assert got == want
    by = _by_path(log)
    assert by[(0, "fc")][0].grad_norm > 0 and by[(0, "act")][0].grad_norm > 0
    assert by[(0, "act")][0].stats["min"] == 0.0 and by[(0, "fc")][0].stats["min"] < 0.0


def test_frozen_parameters():
    torch.manual_seed(0)
    model = Classifier()
    for p in model.network[0].parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    w, log = watch(model, opt)
    with w:
        train_steps(model, opt, [(torch.randn(8, 784), torch.randint(0, 10, (8,)))])
    rows = {p["name"]: p for p in log.summaries()[0].params}
    frozen = rows["network.0.weight"]
    assert frozen["requires_grad"] is False and frozen["grad_norm"] is None
    assert frozen["in_optimizer"] is False and frozen["norm"] > 0
    assert rows["network.2.weight"]["grad_norm"] > 0
    by = _by_path(log)
    assert by[(0, "network.0")][0].grad_norm is None  # its output needs no gradient


def test_inference_under_no_grad_is_one_step_per_forward():
    model = Classifier().eval()
    w, log = watch(model)
    with w, torch.no_grad():
        for _ in range(3):
            model(torch.randn(2, 784))
    sums = log.summaries()
    assert [s.kind for s in sums] == ["inference"] * 3 and [s.step for s in sums] == [0, 1, 2]
    assert all(not d.grad_enabled and d.grad_norm is None and not d.training
               for d in log.digests())
    assert all(s.params == [] for s in sums)


def test_module_that_raises_records_a_finding_and_reraises_unchanged():
    model = Broken()
    w, log = watch(model)
    boom = None
    with w:
        with pytest.raises(RuntimeError) as info:
            model(torch.randn(8, 2048))
        boom = info.value
        out = model(torch.randn(8, 1568))  # the stack is clean afterwards
        w.step()
    assert "mat1 and mat2 shapes cannot be multiplied" in str(boom)
    findings = log.of(Finding)
    f = findings[0]   # as it is raised
    assert (f.kind, f.severity, f.phase, f.module) == ("exception", "error", "forward", "classifier.0")
    assert f.message.startswith("RuntimeError in classifier.0 (Linear 1568->64): mat1 and mat2")
    assert "; input in[0] was [8, 2048] float32 cpu" in f.message
    # the script caught it and called the model again: the same finding, now information
    assert [(g.kind, g.module, g.severity) for g in findings[1:]] == [
        ("exception", "classifier.0", "info")]
    assert findings[1].message == f.message.removesuffix(".") + CAUGHT_NOTE
    ok = [d for d in log.digests() if d.step == 1]
    assert out.shape == (8, 10) and ok[0].path == "" and ok[1].path == "features"


class _SkipsEveryThird(nn.Module):
    """Raises on every third call (a batch the script skips, as OOM handlers do)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls % 3 == 0:
            raise ValueError("bad batch")
        return self.lin(x)


def _skipping_loop(model: nn.Module, opt: torch.optim.Optimizer, steps: int,
                   reraise_from: int | None = None) -> int:
    done = 0
    for i in range(steps):
        try:
            loss = model(torch.randn(3, 4)).pow(2).mean()
        except ValueError:
            if reraise_from is not None and i >= reraise_from:
                raise
            continue
        opt.zero_grad()
        loss.backward()
        opt.step()
        done += 1
    return done


def test_an_exception_the_script_catches_becomes_information_and_one_that_escapes_stays_an_error():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), _SkipsEveryThird(), nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    w, log = watch(model, opt)
    with w:
        assert _skipping_loop(model, opt, 9) == 6
    latest = {f.key: f for f in log.of(Finding)}
    assert [(f.kind, f.module, f.severity, f.count) for f in latest.values()] == [
        ("exception", "1", "info", 3)]
    assert next(iter(latest.values())).message.endswith(CAUGHT_NOTE)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), _SkipsEveryThird(), nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    w, log = watch(model, opt)
    with pytest.raises(ValueError):
        with w:   # the with block reports the exception that ends it
            _skipping_loop(model, opt, 9, reraise_from=4)
    latest = {f.key: f for f in log.of(Finding)}
    f = next(iter(latest.values()))
    assert (f.kind, f.module, f.severity, f.count) == ("exception", "1", "error", 2)
    assert CAUGHT_NOTE not in f.message and f.message.endswith(ESCAPED_NOTE)


def test_exception_propagates_as_the_same_object():
    class Raiser(nn.Module):
        def forward(self, x):
            raise KeyError("nope")

    model = nn.Sequential(nn.Linear(2, 2), Raiser())
    w, log = watch(model)
    err = KeyError("nope")
    with w:
        with pytest.raises(KeyError) as info:
            model(torch.randn(1, 2))
    assert type(info.value) is type(err) and info.value.args == ("nope",)
    assert log.of(Finding)[0].module == "1"


def test_evaluation_batch_with_its_loss_is_one_inference_step():
    model = Classifier()
    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(4, 784), torch.randint(0, 10, (4,))
    w, log = watch(model, opt)
    with w:
        for _ in range(2):
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            for _ in range(2):  # two evaluation batches: model + loss each
                loss_fn(model(x), y)
        model.train()
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
    sums = log.summaries()
    assert [s.kind for s in sums] == ["train", "train", "inference", "inference", "train"]
    assert [s.step for s in sums] == [0, 1, 2, 3, 4]
    assert all(s.loss is not None for s in sums)
    per_step = [sorted({d.path for d in log.digests() if d.step == s.step}) for s in sums]
    assert per_step[2] == per_step[3] and "" in per_step[2]
