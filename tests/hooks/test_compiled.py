"""``torch.compile``: no crash, unchanged numbers, one card at the boundary, eager steps.

Compiling is slow on two cores: the models are tiny and the backends are
dynamo's ``eager``/``aot_eager`` (the hooks' behaviour is decided by dynamo's
tracing, the same for every backend).
"""
from __future__ import annotations

import copy
import warnings

import pytest
import torch
from tensorscope.hooks.compiled import TORCH_WARNING_NOTE, compiled_inner
from tensorscope.hooks.watch import Watch
from torch import nn
from sinks import Log


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 8)
        self.act = nn.ReLU()
        self.b = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.act(self.a(x)))


def _train(model: nn.Module, call: nn.Module, steps: int = 3, opt=None) -> list[float]:
    torch.manual_seed(1)
    opt = opt or torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = call(torch.randn(5, 4)).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _watched_run(order: str, fullgraph: bool, steps: int = 3, **options):
    """Train a compiled Net under a watch; compiled before or after ``watch``."""
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    log = Log()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # torch's "global hooks ... extra time"
        if order == "before":
            compiled = torch.compile(model, fullgraph=fullgraph, backend="eager")
            w = Watch(compiled, opt, connect=False, **options)
        else:
            w = Watch(model, opt, connect=False, **options)
            compiled = torch.compile(model, fullgraph=fullgraph, backend="eager")
        w.session.add_sink(log)
        losses = _train(model, compiled, steps, opt)
        log.tree = w.index.tree()
        w.close()
    return w, log, losses, compiled


@pytest.mark.parametrize("fullgraph", [False, True])
@pytest.mark.parametrize("order", ["before", "after"])
def test_compiled_module_is_one_card_with_its_boundary_captured(order, fullgraph, capsys):
    w, log, _losses, _compiled = _watched_run(order, fullgraph)
    err = capsys.readouterr().err
    digests = log.calls()
    # one call a step, at the card (the wrapper compiled before watch is the root
    # itself; compiled after, it is named as the module it wraps): never twice
    assert sorted({(d.root, d.path) for d in digests}) == [(0, "")]
    assert len(digests) == 3 and len(log.of("StepSummary")) == 3
    assert all(d.grad_norm is not None and d.grad_norm > 0 for d in digests)
    assert digests[0].inputs[0]["shape"] == [5, 4] and digests[0].outputs[0]["shape"] == [5, 2]
    tree = log.tree[0]
    by_path = {m["path"]: m for m in tree["modules"]}
    assert by_path[""]["compiled"] == 3   # a, act, b
    inside = [p for p, m in by_path.items() if "inside_compiled" in m]
    prefix = "_orig_mod." if order == "before" else ""
    assert sorted(inside) == sorted(([] if not prefix else ["_orig_mod"])
                                    + [prefix + n for n in ("a", "act", "b")])
    finding = w.emitter.findings[("compiled", 0, "")]
    assert finding.severity == "info" and "not the 3 modules inside" in finding.message
    assert "--compile-eager-steps N" in finding.message and "without torch.compile" in err
    assert TORCH_WARNING_NOTE not in err   # torch's warning is not shown (below)
    params = {p["name"]: p for p in log.of("StepSummary")[0].params}
    assert params[prefix + "a.weight"]["grad_norm"] > 0   # parameters as for any module


def _compiled_warnings(user_hook: bool) -> list[str]:
    model = Net()
    compiled = torch.compile(model, backend="eager")
    handle = torch.nn.modules.module.register_module_forward_hook(
        lambda m, i, o: None) if user_hook else None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with Watch(model, connect=False):
                _train(model, compiled, steps=2)
    finally:
        if handle is not None:
            handle.remove()
    return [str(w.message) for w in caught if "fire an extra time" in str(w.message)]


def test_torchs_warning_about_global_hooks_is_left_to_the_scripts_own(capsys):
    """torch warns at each call of a compiled module while a global module hook
    exists: with TensorScope's alone (plain python shows nothing) it is silenced;
    with one of the script's own it is shown, with the note on TensorScope's."""
    assert _compiled_warnings(user_hook=False) == []
    assert TORCH_WARNING_NOTE not in capsys.readouterr().err
    assert len(_compiled_warnings(user_hook=True)) == 2
    assert capsys.readouterr().err.count(TORCH_WARNING_NOTE) == 1
    assert not any("global hooks" in str(f[1]) for f in warnings.filters)   # taken away


@pytest.mark.parametrize("order", ["before", "after"])
def test_numbers_are_unchanged_by_watching_a_compiled_model(order):
    torch.manual_seed(0)
    reference = Net()
    twin = copy.deepcopy(reference)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = _train(reference, torch.compile(reference, backend="aot_eager"))
        if order == "before":
            compiled = torch.compile(twin, backend="aot_eager")
            w = Watch(compiled, None, connect=False, mode="full")
        else:
            w = Watch(twin, None, connect=False, mode="full")
            compiled = torch.compile(twin, backend="aot_eager")
        watched = _train(twin, compiled)
        w.close()
    assert watched == plain
    for p, q in zip(reference.parameters(), twin.parameters()):
        assert torch.equal(p, q)


@pytest.mark.parametrize("order", ["before", "after"])
def test_eager_steps_capture_inside_then_hand_over(order, capsys):
    w, log, _, compiled = _watched_run(order, False, steps=4, compile_eager_steps=2)
    prefix = "_orig_mod." if order == "before" else ""
    steps_of: dict[str, list[int]] = {}
    for d in log.calls():
        steps_of.setdefault(d.path, []).append(d.step)
    # given to watch compiled, the first two steps run eagerly; compiled after
    # watch, TensorScope meets it in its first (compiled) call: the next two do
    eager = [0, 1] if order == "before" else [1, 2]
    for name in ("a", "act", "b"):
        assert steps_of[prefix + name] == eager, steps_of   # inside: the eager steps only
    assert steps_of[""] == [0, 1, 2, 3]   # the card: every step, once
    assert "its first 2 steps under TensorScope run the original eager module" in \
        w.emitter.findings[("compiled", 0, "")].message
    assert "forward" in compiled.__dict__ and compiled.forward is not compiled_inner(compiled).__call__


def test_detach_in_the_eager_steps_puts_the_compiled_forward_back():
    model = Net()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = torch.compile(model, backend="eager")
        forward = compiled.__dict__["forward"]
        w = Watch(compiled, None, connect=False, compile_eager_steps=5)
        assert compiled.__dict__["forward"] is not forward
        compiled(torch.randn(2, 4))
        w.close()
    assert compiled.__dict__["forward"] is forward
    for mod in compiled.modules():
        assert not mod._forward_hooks and not mod._forward_pre_hooks


def test_the_report_marks_the_card_and_the_modules_not_observed(tmp_path):
    import json

    model = Net()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = torch.compile(model, backend="eager")
        with Watch(compiled, None, connect=False, report=str(tmp_path / "r.json")):
            compiled(torch.randn(2, 4)).sum().backward()
    report = json.loads((tmp_path / "r.json").read_text())
    root = report["roots"][0]
    assert root["compiled"] == 3 and root["calls"] == 1
    inner = {m["path"]: m for m in root["modules"]}
    assert inner["_orig_mod.a"]["inside_compiled"] == "" and inner["_orig_mod.a"]["calls"] == 0
    compiled_findings = [f for f in report["findings"] if f["kind"] == "compiled"]
    assert [f["severity"] for f in compiled_findings] == ["info"]


def test_the_module_graph_draws_one_labelled_card():
    model = Net()
    log = Log()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = torch.compile(model, backend="eager")
        w = Watch(compiled, None, connect=False)
        w.session.add_sink(log)
        with w:
            compiled(torch.randn(2, 4)).sum().backward()
    graph = next(g for g in log.of("GraphStructure") if g.kind == "module")
    calls = [n for n in graph.nodes if n["kind"] == "call"]
    assert len(calls) == 1 and calls[0]["compiled"] == 3
    assert calls[0]["label"] == "Net: compiled: 3 modules inside"
