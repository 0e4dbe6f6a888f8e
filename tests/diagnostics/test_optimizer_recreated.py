"""``optimizer_recreated``: a new stateful optimizer before every step, and the
episodes that rebuild one on purpose with the weights they restore."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink


@pytest.mark.parametrize("restore,found", [
    (None, {("optimizer_recreated", "")}),   # built inside the loop: every step a first step
    ("load_state_dict", set()),              # episodic adaptation: weights restored first
    ("copy_", set()),
])
def test_a_fresh_optimizer_per_step_unless_the_weights_are_restored(restore: str | None,
                                                                    found: set) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 4))
    w = tensorscope.watch(model, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    source = copy.deepcopy(model.state_dict())
    for _ in range(8):
        if restore == "load_state_dict":
            model.load_state_dict(source)
        elif restore == "copy_":
            with torch.no_grad():
                for name, p in model.named_parameters():
                    p.copy_(source[name])
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        loss = F.cross_entropy(model(torch.randn(16, 8)), torch.randint(0, 4, (16,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    w.close()
    assert {k for k in sink.findings if k[0] == "optimizer_recreated"} == found
