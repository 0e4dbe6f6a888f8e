"""TorchScript on a watched model: scripting and tracing work, the watch goes on."""
from __future__ import annotations

import copy

import torch
from torch import nn

from hooks_zoo import watch


def user_hook(module: nn.Module, inputs: tuple[torch.Tensor], output: torch.Tensor) -> None:
    """A user's own forward hook, scriptable (TorchScript compiles it with the module)."""
    return None


def _step(model: nn.Module, opt: torch.optim.Optimizer) -> float:
    loss = model(torch.randn(3, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


def test_script_and_trace_of_a_watched_model(capfd) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    w, log = watch(model, opt)
    model[0].register_forward_hook(user_hook)   # the user's own, after ours
    try:
        _step(model, opt)
        order = {n: [list(m._forward_pre_hooks.values()), list(m._forward_hooks.values())]
                 for n, m in model.named_modules()}
        x = torch.ones(1, 4)
        scripted = torch.jit.script(model)   # compiled the capture's hooks, and failed
        scripted_copy = torch.jit.script(copy.deepcopy(model))
        traced = torch.jit.trace(model, torch.randn(1, 4))
        with torch.no_grad():
            want = model(x)
            assert all(torch.equal(m(x), want) for m in (scripted, scripted_copy, traced))
        assert {n: [list(m._forward_pre_hooks.values()), list(m._forward_hooks.values())]
                for n, m in model.named_modules()} == order
        calls = len(log.digests())
        _step(model, opt)
        w.step()
        assert len(log.digests()) > calls   # still watched after
    finally:
        w.close()
    assert "internal error" not in capfd.readouterr().err
