"""A tensor subclass's ``__torch_function__`` sees the user's calls only: what the
hooks, the diagnostics and the step end read of its tensors is not its business (a
subclass that logs or counts its calls must print the same with TensorScope on)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import tensorscope


class Logged(torch.Tensor):
    calls: list[str] = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


def _train(watched: bool) -> tuple[list[str], list[float]]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), 0.1)
    w = tensorscope.watch([model, loss_fn], opt, connect=False, stats_every=1) if watched else None
    Logged.calls = []
    losses = []
    for _ in range(4):
        x = torch.randn(5, 4).as_subclass(Logged)
        y = torch.randint(0, 3, (5,))
        out = model(x)
        loss = loss_fn(out, y) + F.mse_loss(out, torch.zeros(5, 3))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    if w is not None:
        w.close()
    return Logged.calls, losses


def test_the_subclass_sees_the_users_calls_only():
    plain_calls, plain_losses = _train(False)
    calls, losses = _train(True)
    assert losses == plain_losses
    assert calls == plain_calls
