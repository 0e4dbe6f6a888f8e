"""``grad_accumulation`` beside an optimizer whose closure zeroes its own gradients
inside ``step()``: another model's backward does not reach them."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink


@pytest.mark.parametrize("forget,found", [(False, set()), (True, {("grad_accumulation", "")})])
def test_a_closure_optimizer_beside_a_plain_one(forget: bool, found: set) -> None:
    torch.manual_seed(0)
    m1 = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
    m2 = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
    opt1 = torch.optim.Adam(m1.parameters(), lr=3e-3)
    opt2 = torch.optim.Adam(m2.parameters(), lr=3e-3)
    w = tensorscope.watch([m1, m2], [opt1, opt2], connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    target = torch.randn(8, 1)
    for _ in range(8):
        x = torch.randn(32, 8)
        loss = F.mse_loss(m1(x), x @ target)
        if not forget:
            opt1.zero_grad()
        loss.backward()
        opt1.step()

        def closure() -> torch.Tensor:
            opt2.zero_grad()
            out = F.mse_loss(m2(x), x @ target)
            out.backward()
            return out

        opt2.step(closure)
    w.close()
    assert {k[:2] for k in sink.findings if k[0] == "grad_accumulation"} == found
    if forget:
        assert all(f.root == 0 for k, f in sink.findings.items() if k[0] == "grad_accumulation")
