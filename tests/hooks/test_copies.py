"""A deep copy or a pickle of a watched model: no TensorScope in the copy, no failure."""
from __future__ import annotations

import copy
import io
import pickle

import torch
from torch import nn

from hooks_zoo import watch


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def _train(model: nn.Module, opt: torch.optim.Optimizer, ema: nn.Module) -> list[float]:
    losses = []
    torch.manual_seed(1)
    for _ in range(3):
        loss = model(torch.randn(5, 4)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for pe, p in zip(ema.parameters(), model.parameters()):
                pe.lerp_(p, 0.1)
        losses.append(loss.item())
    return losses


def _copies(model: nn.Module) -> list[float]:
    """What a script does with copies: EMA, a snapshot, torch.save, pickle."""
    x = torch.ones(2, 4)
    best = copy.deepcopy(model)
    buf = io.BytesIO()
    torch.save(model, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    unpickled = pickle.loads(pickle.dumps(model))
    return [m(x).sum().item() for m in (best, loaded, unpickled)]


def test_copies_of_a_watched_model_work_and_are_not_watched(capfd) -> None:
    plain = _model()
    plain_opt = torch.optim.SGD(plain.parameters(), lr=0.1)
    expected = _train(plain, plain_opt, copy.deepcopy(plain)), _copies(plain)

    model = _model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, log = watch(model, opt)
    try:
        ema = copy.deepcopy(model)   # made while watched: it carries the hooks' copies
        got = _train(model, opt, ema), _copies(model)
        assert got == expected
        calls = len(log.digests())
        for clone in (ema, copy.deepcopy(model)):
            clone(torch.ones(2, 4))   # the copies' calls are not the watch's
        w.step()
        assert calls and len(log.digests()) == calls
    finally:
        w.close()
    assert "internal error" not in capfd.readouterr().err
