"""``scheduler_before_step``: ``lr_scheduler.step()`` before the optimizer's first step."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink


def _train(order: str, fast_forward: int = 0) -> set[tuple[str, str]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    w = tensorscope.watch(model, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for _ in range(fast_forward):   # a resumed schedule brought up to its epoch
        sched.step()
    for _ in range(4):
        if order == "before":
            sched.step()
        opt.zero_grad()
        F.cross_entropy(model(torch.randn(8, 6)), torch.randint(0, 2, (8,))).backward()
        opt.step()
        if order == "after":
            sched.step()
    w.close()
    assert not getattr(torch.optim.lr_scheduler.LRScheduler.step, "__tensorscope_wrapped__",
                       False)   # put back on detach
    return {k for k in sink.findings if k[0] == "scheduler_before_step"}


def test_scheduler_stepped_before_the_optimizer_is_found() -> None:
    assert _train("before") == {("scheduler_before_step", "")}


def test_scheduler_after_the_optimizer_or_fast_forwarded_is_not() -> None:
    assert _train("after") == set()
    assert _train("after", fast_forward=3) == set()
