"""Diagnostics that read a graph's saved values stay quiet on a graph an earlier
backward freed: REINFORCE whose log-probabilities are never cleared backpropagates
through the previous episode's graph, and the script's own error is the finding."""
from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.distributions import Categorical

import tensorscope
from sinks import FindingSink


class Policy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.affine1 = nn.Linear(4, 32)
        self.affine2 = nn.Linear(32, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.affine2(torch.relu(self.affine1(x))), dim=1)


def test_log_probs_never_cleared_raise_the_scripts_error_and_no_internal_one() -> None:
    torch.manual_seed(0)
    policy = Policy()
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    w = tensorscope.watch(policy, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    saved: list[torch.Tensor] = []
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        for _ in range(3):
            for _ in range(10):
                m = Categorical(policy(torch.randn(1, 4)))
                saved.append(m.log_prob(m.sample()))   # never cleared: the slip
            loss = torch.cat([-lp for lp in saved]).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
    w.close()
    assert not [k for k in sink.findings if k[0] == "internal_error"]
    (exc,) = [f for k, f in sink.findings.items() if k[0] == "exception"]
    assert "a tensor kept from an earlier iteration" in exc.message
    assert "clear such lists after each update" in exc.message
