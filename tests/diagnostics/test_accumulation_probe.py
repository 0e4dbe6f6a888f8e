"""``AccumulationProbe``: whether a backward accumulates into a root's parameters,
asked through the node of the parameter that answered last time."""
from __future__ import annotations

import gc
import weakref

import torch
from torch import nn

from tensorscope.hooks.diagnostics.memory import AccumulationProbe, accumulates


def _asked_in_backward(model: nn.Module, probe: AccumulationProbe, loss: torch.Tensor,
                       **grad: object) -> list[bool]:
    """Run a backward of ``loss`` whose first node asks the probe (and the plain walk)."""
    answers: list[bool] = []

    def hook(*_: object) -> None:
        answers.append(probe(0, model))
        answers.append(accumulates(model))

    loss.grad_fn.register_prehook(lambda *_: hook())
    if grad:
        torch.autograd.grad(loss, **grad)
    else:
        loss.backward()
    return answers


def test_backward_then_autograd_grad_of_an_input() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
    probe = AccumulationProbe()
    for _ in range(3):   # the later ones take the kept node
        assert _asked_in_backward(model, probe, model(torch.randn(2, 4)).sum()) == [True, True]
    x = torch.randn(2, 4, requires_grad=True)
    # a gradient penalty's autograd.grad of the input accumulates into no parameter
    assert _asked_in_backward(model, probe, model(x).sum(), inputs=[x]) == [False, False]
    assert _asked_in_backward(model, probe, model(x).sum()) == [True, True]


def test_a_replaced_or_frozen_parameter_is_not_asked() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1))
    probe = AccumulationProbe()
    assert _asked_in_backward(model, probe, model(torch.randn(2, 4)).sum()) == [True, True]
    # the kept parameter is replaced, then the whole first layer frozen: the rest counts
    model[0].weight = nn.Parameter(torch.randn(4, 4))
    assert _asked_in_backward(model, probe, model(torch.randn(2, 4)).sum()) == [True, True]
    model[0].requires_grad_(False)
    assert _asked_in_backward(model, probe, model(torch.randn(2, 4)).sum()) == [True, True]
    x = torch.randn(2, 4, requires_grad=True)
    assert _asked_in_backward(model, probe, model(x).sum(), inputs=[x]) == [False, False]


def test_the_probe_lets_a_model_go() -> None:
    model = nn.Linear(4, 1)
    probe = AccumulationProbe()
    assert _asked_in_backward(model, probe, model(torch.randn(2, 4)).sum()) == [True, True]
    ref = weakref.ref(model)
    del model
    gc.collect()
    assert ref() is None   # the entry holds the module weakly (its parameter until cleared)
    probe.clear()


def test_a_traced_module_is_asked_too() -> None:
    """A ``torch.jit.trace`` module's ``_parameters`` is TorchScript's own mapping."""
    torch.manual_seed(0)
    traced = torch.jit.trace(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 1)), torch.randn(2, 4))
    probe = AccumulationProbe()
    for _ in range(3):
        assert _asked_in_backward(traced, probe, traced(torch.randn(2, 4)).sum()) == [True, True]


def test_a_failing_listener_never_reaches_the_users_backward(capsys) -> None:
    import tensorscope

    torch.manual_seed(0)
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w = tensorscope.watch(model, opt, connect=False)
    graphs = next(o for o in w.capture.observers.all if type(o).__name__ == "GraphObserver")

    def broken() -> None:
        raise RuntimeError("listener bug")

    graphs.add_backward_listener(broken)
    plain = nn.Linear(4, 1)
    plain.load_state_dict(model.state_dict())
    x = torch.randn(8, 4)
    for m in (model, plain):
        m(x).pow(2).mean().backward()   # must not raise
    w.close()
    assert torch.equal(model.weight.grad, plain.weight.grad)
    assert "backward-seen check failed" in capsys.readouterr().err
