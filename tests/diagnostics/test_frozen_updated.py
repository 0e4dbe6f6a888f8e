"""``ineffective_freeze`` for frozen parameters the optimizer still moves: their
gradients are zero tensors (not None), so weight decay and momentum go on updating
them. Frozen parameters whose gradients are None are skipped by every optimizer."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU())
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))


def _finetune(opt_name: str, set_to_none: bool, freeze_at: int) -> set:
    """22 steps; the backbone frozen before step ``freeze_at``, the optimizer built over
    every parameter."""
    torch.manual_seed(0)
    model = Net()
    if opt_name == "adamw":
        opt: torch.optim.Optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3,
                                                       weight_decay=0.05)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    w = tensorscope.watch(model, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for step in range(22):
        if step == freeze_at:
            model.backbone.requires_grad_(False)
        opt.zero_grad(set_to_none=set_to_none)
        F.cross_entropy(model(torch.randn(8, 10)), torch.randint(0, 3, (8,))).backward()
        opt.step()
    w.close()
    return {k for k in sink.findings if k[1] != "head" or k[0] != "unused_parameter"}


def test_frozen_after_training_began_with_zeroed_gradients_is_still_updated() -> None:
    for opt_name in ("adamw", "sgd"):
        assert _finetune(opt_name, set_to_none=False, freeze_at=4) == {
            ("ineffective_freeze", "backbone")}, opt_name


def test_frozen_parameters_without_gradients_are_left_alone() -> None:
    """``zero_grad()`` sets the frozen gradients to None (or they never had one): the
    optimizer skips them, weight decay included."""
    for opt_name in ("adamw", "sgd"):
        assert not _finetune(opt_name, set_to_none=True, freeze_at=4), opt_name
        assert not _finetune(opt_name, set_to_none=False, freeze_at=0), opt_name
