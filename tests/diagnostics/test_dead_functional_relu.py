"""``dead_activation`` for an ``F.relu`` between two module calls, the pytorch/examples
style ``x = F.relu(self.fc1(x))`` in the middle of a forward: checked where the
next module consumes it, named at the module it was applied to."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink


class Net(nn.Module):
    def __init__(self, bias: float) -> None:
        super().__init__()
        self.fc1 = nn.Linear(20, 64)
        self.fc2 = nn.Linear(64, 4)
        nn.init.constant_(self.fc1.bias, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.fc1(x))
        return self.fc2(x)


def _run(bias: float, steps: int = 6, die_at: int | None = None,
         stats_every: int = 10) -> dict:
    torch.manual_seed(0)
    model = Net(bias)
    opt = torch.optim.SGD(model.parameters(), lr=0.0 if die_at is not None else 0.01)
    w = tensorscope.watch(model, opt, connect=False, stats_every=stats_every)
    sink = FindingSink()
    w.session.add_sink(sink)
    for step in range(steps):
        if step == die_at:
            with torch.no_grad():
                model.fc1.bias.fill_(-50.0)
        opt.zero_grad()
        F.cross_entropy(model(torch.randn(32, 20)), torch.randint(0, 4, (32,))).backward()
        opt.step()
    w.close()
    return {k: v for k, v in sink.findings.items() if k[0] == "dead_activation"}


def test_a_dead_functional_relu_mid_forward_is_named_at_its_producer() -> None:
    found = _run(bias=-10.0)
    assert set(found) == {("dead_activation", "fc1")}
    assert "the F.relu applied to fc1's output (Linear)" in found[("dead_activation", "fc1")].message


def test_a_functional_relu_that_dies_late_is_found_on_statistics_steps() -> None:
    found = _run(bias=0.0, steps=40, die_at=12, stats_every=5)
    assert found[("dead_activation", "fc1")].step == 15


@pytest.mark.parametrize("bias", [0.0, -0.5])
def test_a_healthy_functional_relu_is_silent(bias: float) -> None:
    assert _run(bias) == {}
