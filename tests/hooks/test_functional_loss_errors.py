"""A functional loss that raises gets the finding a loss module's exception gets."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hooks_zoo import watch
from tensorscope.common.events import ExceptionRaised, Finding
from tensorscope.hooks.watch_events import CAUGHT_NOTE, ESCAPED_NOTE


def _latest(log):
    return {f.key: f for f in log.of(Finding)}


def test_a_target_out_of_range_in_f_cross_entropy_is_named_with_its_hint_and_the_error_escapes():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, log = watch(model, opt)
    with pytest.raises(IndexError, match="Target 3 is out of bounds"):
        with w:
            F.cross_entropy(model(torch.randn(4, 8)), torch.tensor([0, 1, 2, 3]))
    (f,) = _latest(log).values()
    assert (f.kind, f.severity, f.phase, f.root, f.module) == ("exception", "error", "loss", 0, "")
    assert f.message.startswith("IndexError in F.cross_entropy (called after the forward of ")
    assert "input was [4, 3] float32 cpu, target was [4] int64 cpu" in f.message
    assert "targets must be in [0, 2]" in f.message and ESCAPED_NOTE not in f.message
    (exc,) = log.of(ExceptionRaised)
    assert (exc.type, exc.root, exc.module) == ("IndexError", 0, "")


def test_a_shape_mismatch_in_f_mse_loss_says_which_shapes_differ():
    model = nn.Linear(8, 3)
    w, log = watch(model)
    with w, pytest.raises(RuntimeError, match="must match the size"):
        F.mse_loss(model(torch.randn(4, 8)), torch.randn(4, 5))
    (f,) = _latest(log).values()
    assert f.kind == "exception" and "F.mse_loss" in f.message
    assert "the shapes [4, 3] and [4, 5] differ at dimension 1 (3 against 5)" in f.message


def test_a_functional_loss_error_the_script_catches_becomes_information():
    torch.manual_seed(0)
    model = nn.Linear(8, 3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, log = watch(model, opt)
    done = 0
    with w:
        for step in range(3):
            opt.zero_grad()
            y = torch.tensor([0, 1, 2, 3]) if step == 0 else torch.tensor([0, 1, 2, 2])
            try:
                loss = F.cross_entropy(model(torch.randn(4, 8)), y)
            except IndexError:
                continue
            loss.backward()
            opt.step()
            done += 1
    assert done == 2
    (f,) = _latest(log).values()
    assert (f.kind, f.severity) == ("exception", "info")
    assert f.message.endswith(CAUGHT_NOTE) and ".." not in f.message


class _LossInside(nn.Module):
    """Computes its loss in its forward (as many models do)."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.head(x), y)


def test_a_functional_loss_inside_a_forward_is_one_finding_at_that_module():
    model = _LossInside()
    w, log = watch(model)
    with w, pytest.raises(IndexError):
        model(torch.randn(4, 8), torch.tensor([0, 1, 2, 5]))
    (f,) = _latest(log).values()
    assert (f.kind, f.module) == ("exception", "")
    assert "F.cross_entropy (called in the forward of _LossInside)" in f.message
    assert "targets must be in [0, 2]" in f.message


def test_the_loss_and_its_gradients_are_unchanged_by_the_wrapper():
    torch.manual_seed(0)
    model = nn.Linear(8, 3)
    x, y = torch.randn(4, 8), torch.tensor([0, 1, 2, 2])
    plain = F.cross_entropy(model(x), y)
    plain.backward()
    g = model.weight.grad.clone()
    model.weight.grad = None
    w, _ = watch(model)
    with w:
        watched = F.cross_entropy(model(x), y)
        watched.backward()
    assert torch.equal(plain, watched) and torch.equal(g, model.weight.grad)
