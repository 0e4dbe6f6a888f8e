"""``exception`` raised inside ``backward()``: named at the module responsible."""
from __future__ import annotations

import contextlib

import pytest
import torch
from torch import nn

import tensorscope
from sinks import Log


def _findings(model: nn.Module, body) -> list:
    original = torch.autograd.backward
    w = tensorscope.watch(model, connect=False)
    sink = Log()
    w.session.add_sink(sink)
    try:
        body()
    finally:
        w.close()
    assert torch.autograd.backward is original   # put back on detach
    return [m for m in sink.of("Finding") if m.kind == "exception"]


def test_inplace_change_of_a_saved_output_names_the_module_that_changed_it() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Sigmoid(), nn.ReLU(inplace=True), nn.Linear(8, 1))

    def body() -> None:
        with pytest.raises(RuntimeError, match="inplace operation") as info:
            model(torch.randn(3, 4)).sum().backward()
        assert "modified by an inplace operation" in str(info.value)   # unchanged

    (f,) = _findings(model, body)
    assert (f.module, f.phase, f.severity) == ("2", "backward", "error")   # nothing after
    assert "2 (ReLU) changed the output of 1 (Sigmoid)" in f.message and "Fix" in f.message


def test_a_tensor_hook_raising_names_the_model_and_the_line() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))

    def hook(grad: torch.Tensor) -> torch.Tensor:
        raise ZeroDivisionError("in the hook")

    def body() -> None:
        out = model(torch.randn(3, 4))
        out.register_hook(hook)
        with pytest.raises(ZeroDivisionError):
            out.sum().backward()
        model(torch.randn(3, 4)).sum().backward()   # the next backward is fine

    (f,) = _findings(model, body)
    assert f.module == "" and "in hook" in f.message and "ZeroDivisionError" in f.message
    assert f.severity == "info" and "caught it" in f.message   # the script went on


def test_a_backward_that_succeeds_is_not_a_finding() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(inplace=True), nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def body() -> None:
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(3, 4)).pow(2).mean().backward()
            opt.step()

    assert _findings(model, body) == []


def _manual_update(no_grad: bool) -> list:
    """A hand-written SGD step that ends the ``with watch`` block by raising (or not)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    sink = Log()
    with pytest.raises(RuntimeError, match="leaf Variable") if not no_grad else contextlib.nullcontext():
        with tensorscope.watch(model, connect=False) as w:
            w.session.add_sink(sink)
            for _ in range(2):
                model.zero_grad()
                model(torch.randn(3, 4)).pow(2).mean().backward()
                with torch.no_grad() if no_grad else contextlib.nullcontext():
                    for p in model.parameters():
                        p -= 0.01 * p.grad
    return [m for m in sink.of("Finding") if m.kind == "exception"]


def test_a_manual_update_outside_no_grad_is_named_at_the_model() -> None:
    """``p -= lr * p.grad`` while autograd records raises in the script's own code: no
    module or backward saw it, yet it is the classic mistake, named at the root."""
    (f,) = _manual_update(no_grad=False)
    assert (f.module, f.phase, f.severity) == ("", "optimizer", "error")
    assert "torch.no_grad()" in f.message
    assert not _manual_update(no_grad=True)
