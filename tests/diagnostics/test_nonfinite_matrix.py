"""The non-finite invariant as a matrix: NaN/Inf injected at each place, in each mode.

Each case trains a small model in process under ``tensorscope.watch`` and
injects a non-finite value at one place (the data, a weight before training,
a forward op, a backward op, the optimizer update, the loss). Every run must
end with a ``non_finite`` finding of severity ``error``; where the mode
probes values (``default``, ``full``), the finding's module and phase are
the injected place. ``shapes`` mode probes nothing on the device: it still
reports the incident (from the loss, the data still alive, the weights
before the first forward), with phase ``loss`` when only the loss shows it.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tensorscope

STEPS = 5
AT = 2   # the step the value is injected in (weights: before training)


class Norm(nn.Module):
    """Divides each row by its norm: infinite derivative at a row of zeros."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / (torch.sqrt((x * x).sum(1, keepdim=True)) + 1e-6)


class Log(nn.Module):
    """log of its input: -inf at zero."""

    def __init__(self) -> None:
        super().__init__()
        self.poison = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(x.abs() * (0.0 if self.poison else 1.0) + (0.0 if self.poison else 1.0))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.Tanh()   # passes a NaN gradient on (a ReLU would zero it here)
        self.norm = Norm()
        self.log = Log()
        self.fc2 = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.log(self.norm(self.act(self.fc1(x)))))


class FindingSink:
    def __init__(self) -> None:
        self.findings: list = []

    def handle(self, msg: object) -> None:
        if type(msg).__name__ == "Finding":
            self.findings.append(msg)

    def close(self) -> None:
        pass


def _run(case: str, mode: str) -> list:
    torch.manual_seed(0)
    model = Net()
    groups = [{"params": model.fc1.parameters()}, {"params": model.fc2.parameters()}]
    opt = torch.optim.SGD(groups, lr=0.01)
    if case == "weight":
        with torch.no_grad():
            model.fc2.weight[0, 3] = float("nan")   # e.g. loaded from a checkpoint
    w = tensorscope.watch(model, opt, mode=mode, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    loss_fn = nn.MSELoss()
    try:
        for step in range(STEPS):
            x, y = torch.randn(16, 8), torch.randn(16, 1)
            if step == AT and case == "data":
                x[:, 2] = torch.log(torch.zeros(16))     # log(count) with counts of zero
            if case == "backward" and step == AT:
                with torch.no_grad():
                    model.fc1.weight.zero_()
                    model.fc1.bias.zero_()       # rows of zeros: Norm's sqrt(0)
            model.log.poison = case == "forward" and step == AT
            opt.param_groups[1]["lr"] = float("inf") if case == "optimizer" and step == AT \
                else 0.01
            opt.zero_grad()
            out = model(x)
            loss = loss_fn(out, y)
            if case == "loss" and step == AT:
                loss = loss + torch.log(out.abs().sum() * 0.0)   # -inf, outside any module
            loss.backward()
            opt.step()
    finally:
        w.close()
    return [f for f in sink.findings if f.kind == "non_finite"]


# (module, phase) where the mode probes values
EXPECTED = {
    "data": ("", "input"),
    "weight": ("fc2", "forward"),
    "forward": ("log", "forward"),
    "backward": ("norm", "backward"),
    "optimizer": ("fc2", "optimizer"),
    "loss": ("", "loss"),
}
# shapes mode: what it can know without device probes
# (the data case: the -inf data of step 2 gives a finite forward; the NaN shows in the
# loss of step 3, whose data is clean)
EXPECTED_SHAPES = {"weight": ("fc2", "forward")}


@pytest.mark.parametrize("mode", ["shapes", "default", "full"])
@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_non_finite_is_never_silent(case: str, mode: str) -> None:
    found = _run(case, mode)
    assert found, f"{case} in {mode} mode: no non_finite finding"
    assert all(f.severity == "error" for f in found)
    first = found[0]
    want = EXPECTED_SHAPES.get(case) if mode == "shapes" else EXPECTED[case]
    if want is not None:
        assert (first.module, first.phase) == want, (case, mode, first.message)
    if case == "weight":
        assert "fc2.weight" in first.message and "before step 0's forward" in first.message
    if case == "optimizer" and mode != "shapes":
        assert "diverged" in first.message
    assert len(found) == 1, [(f.module, f.phase, f.message[:80]) for f in found]


class Masked(nn.Module):
    """A classifier whose masked classes get -inf logits (an additive mask input)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + bias


@pytest.mark.parametrize("mode", ["shapes", "default", "full"])
def test_masked_logits_are_not_an_incident(mode: str) -> None:
    """-inf logits of masked classes, turned to zeros by softmax: no finding."""
    torch.manual_seed(0)
    model = Masked()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    mask = torch.tensor([0.0, 0.0, float("-inf"), 0.0, float("-inf")])
    w = tensorscope.watch(model, opt, mode=mode, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    try:
        for _ in range(4):
            opt.zero_grad()
            logits = model(torch.randn(8, 4), mask)
            F.cross_entropy(logits, torch.tensor([0, 1, 3, 0, 1, 3, 0, 1])).backward()
            opt.step()
    finally:
        w.close()
    assert not [f for f in sink.findings if f.kind == "non_finite"]
