"""``tiny_updates`` from the learning rate itself: a schedule that brought the rate
down to 1e-4 of its peak for good (``schedulers.LrCollapseObserver``)."""
from __future__ import annotations

from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink

Schedule = Callable[[torch.optim.Optimizer], Any]


def _train(make: Schedule | None, steps: int = 40, lr: float = 0.1,
           manual: float | None = None, groups: bool = False) -> dict[tuple[str, str], Any]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
    params: Any = model.parameters()
    if groups:   # the first layer frozen with lr=0 from the start, the head trains
        params = [{"params": model[0].parameters(), "lr": 0.0},
                  {"params": model[2].parameters()}]
    opt = torch.optim.SGD(params, lr=lr, momentum=0.9)
    sched = make(opt) if make is not None else None
    w = tensorscope.watch(model, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for _ in range(steps):
        opt.zero_grad()
        F.cross_entropy(model(torch.randn(32, 10)), torch.randint(0, 3, (32,))).backward()
        opt.step()
        if sched is not None:
            sched.step()
        if manual is not None:
            for g in opt.param_groups:
                g["lr"] *= manual
    w.close()
    return {k: v for k, v in sink.findings.items() if k[0] == "tiny_updates"}


@pytest.mark.parametrize("make", [
    lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=5, gamma=0.1),
    lambda o: torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.7),
    lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=1, gamma=0.5),
], ids=["steplr", "exponential", "halving"])
def test_an_epoch_scheduler_stepped_every_batch_is_found_within_forty_steps(make: Schedule) -> None:
    found = _train(make)
    assert set(found) == {("tiny_updates", "")}
    msg = found[("tiny_updates", "")].message
    assert "The learning rate has collapsed for Sequential" in msg
    assert "Its scheduler decayed optimizer0 group0's learning rate from 0.1 to" in msg
    assert "stepped every batch" in msg and "Fix: call scheduler.step() once per epoch" in msg


def test_a_rate_decayed_by_hand_is_found_with_its_own_causes() -> None:
    found = _train(None, manual=0.6)
    msg = found[("tiny_updates", "")].message
    assert "a rate decayed by hand" in msg and "Its scheduler" not in msg


@pytest.mark.parametrize("make", [
    lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=40),
    lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=15),   # and back up
    lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=40),
    lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: s / 4 if s < 4 else (40 - s) / 36),
    lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda s: s / 100_000),   # a long warmup
    lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=10, gamma=0.1),   # per epoch, 10 batches
    lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[10, 20, 30], gamma=0.1),
], ids=["cosine-to-zero", "cosine-restarting", "one-cycle", "warmup-linear-decay", "long-warmup",
        "steplr-per-epoch", "three-decays"])
def test_schedules_that_end_low_or_decay_a_thousandfold_are_silent(make: Schedule) -> None:
    assert _train(make) == {}


def test_a_group_frozen_with_lr_zero_from_the_start_does_not_count() -> None:
    assert _train(lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=10, gamma=0.5),
                  groups=True) == {}
    # the trained group collapsing is still found
    found = _train(lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.1),
                   groups=True)
    assert "group1" in found[("tiny_updates", "")].message
