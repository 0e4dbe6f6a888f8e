"""``grad_accumulation`` for hand-written updates that never clear the gradients
(``manual_updates``), and the manual loops that do."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink


def _run(clear: str, steps: int = 12, micro: int = 1) -> set[tuple[str, str]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    w = tensorscope.watch(model, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for _ in range(steps):
        for _ in range(micro):
            x = torch.randn(32, 4)
            (F.mse_loss(model(x), x.sum(1, keepdim=True)) / micro).backward()
        if clear == "fisher":   # importance scores: gradients summed, weights untouched
            continue
        with torch.no_grad():
            for p in model.parameters():
                p -= 1e-3 * p.grad
        if clear == "none":
            continue
        if clear == "zero_":
            for p in model.parameters():
                p.grad.zero_()
        elif clear == "set_none":
            for p in model.parameters():
                p.grad = None
        else:
            model.zero_grad()
    w.close()
    return {k[:2] for k in sink.findings if k[0] == "grad_accumulation"}


def test_a_manual_update_that_never_clears_the_gradients_is_found() -> None:
    assert _run("none") == {("grad_accumulation", "")}


@pytest.mark.parametrize("clear,micro", [("zero_", 1), ("set_none", 1), ("zero_grad", 1),
                                         ("zero_grad", 4), ("fisher", 1)])
def test_manual_loops_that_clear_or_only_sum_are_silent(clear: str, micro: int) -> None:
    assert _run(clear, micro=micro) == set()
