"""``unscaled_accumulation`` and gradients divided by the script itself after the
backwards (``grad_rescale``): the division is the fix, clipping and a
GradScaler's unscale are not."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tensorscope
from sinks import FindingSink

K = 4


def _run(after: str, scaler: bool = False) -> set[tuple[str, str]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    amp = torch.amp.GradScaler("cpu") if scaler else None
    w = tensorscope.watch(model, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    target = torch.randn(12, 1)
    for _ in range(6):
        opt.zero_grad()
        for _ in range(K):
            x = torch.randn(16, 12)
            loss = F.mse_loss(model(x), x @ target)
            (amp.scale(loss) if amp is not None else loss).backward()
        if amp is not None:
            amp.unscale_(opt)
        if after == "div_":
            for p in model.parameters():
                p.grad.div_(K)
        elif after == "replace":
            for p in model.parameters():
                p.grad = p.grad / K
        if after in ("div_", "clip_norm"):
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        elif after == "clip_value":
            torch.nn.utils.clip_grad_value_(model.parameters(), 5.0)
        if amp is not None:
            amp.step(opt)
            amp.update()
        else:
            opt.step()
    w.close()
    return {k for k in sink.findings if k[0] == "unscaled_accumulation"}


@pytest.mark.parametrize("after", ["div_", "replace"])
def test_gradients_divided_after_the_backwards_are_not_an_undivided_accumulation(
        after: str) -> None:
    assert _run(after) == set()


@pytest.mark.parametrize("after,scaler", [("nothing", False), ("clip_norm", False),
                                          ("clip_value", False), ("clip_norm", True)])
def test_clipping_or_unscaling_undivided_gradients_is_still_found(after: str,
                                                                  scaler: bool) -> None:
    assert _run(after, scaler) == {("unscaled_accumulation", "")}
