"""The diagnostics read tensors autograd saved (an NLL node's target, a product's
constant factor) without running saved-tensor unpack hooks: under
``torch.utils.checkpoint(use_reentrant=False)`` an unpack recomputes the whole
checkpointed forward."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from hooks_zoo import watch
from tensorscope.common.events import Finding


class Gated(nn.Module):
    """A gate scaled by a constant buffer: a product whose backward saves the constant
    factor (what a soft cross-entropy's target looks like to the checks)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.register_buffer("gain", torch.linspace(0.5, 1.5, 8))
        self.runs = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.runs += 1
        return self.fc(x) * self.gain


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Gated()
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(checkpoint(self.block, x, use_reentrant=False))


def _train(model: Net, steps: int) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(torch.randn(4, 8)), torch.randint(0, 3, (4,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_a_checkpointed_block_is_recomputed_once_per_backward_as_without_tensorscope():
    """The target checks read the product's saved factor at backward: the read ran
    the checkpoint's recomputation outside the backward (the block ran three times a
    step, not two), and the recomputed block's calls, made outside any backward, were
    root calls whose unused graphs made a grad_tracking_in_inference warning."""
    torch.manual_seed(0)
    plain = Net()
    base = _train(plain, 4)
    torch.manual_seed(0)
    model = Net()
    w, log = watch(model)
    with w:
        losses = _train(model, 4)
    assert losses == base
    assert model.block.runs == plain.block.runs == 8
    assert [f.kind for f in log.of(Finding)] == []
    assert [s.calls for s in log.summaries()] == [4] * 4
