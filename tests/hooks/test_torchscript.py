"""TorchScript on a watched model: scripting and tracing work, the watch goes on."""
from __future__ import annotations

import copy
import subprocess
import sys

import torch
from torch import nn

from hooks_zoo import watch


def user_hook(module: nn.Module, inputs: tuple[torch.Tensor], output: torch.Tensor) -> None:
    """A user's own forward hook, scriptable (TorchScript compiles it with the module)."""
    return None


def _twice(x: int) -> int:
    """A module-level function a scripted class calls (resolved in its caller's frame)."""
    return 2 * x


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


def test_a_class_scripted_while_watched_resolves_its_names_where_it_is_scripted() -> None:
    w, _log = watch(nn.Linear(2, 2))
    try:
        @torch.jit.script
        class Doubler:
            def __init__(self, k: int) -> None:
                self.k = _twice(k)   # undefined value _twice: looked up in the wrapper

        assert Doubler(3).k == 6
    finally:
        w.close()


def test_torch_distributed_optim_imports_under_run(tmp_path) -> None:
    # it scripts its functional optimizers' classes at import (ZeroRedundancyOptimizer)
    script = tmp_path / "zero.py"
    script.write_text("from torch.distributed.optim import ZeroRedundancyOptimizer\n"
                      "print('imported', ZeroRedundancyOptimizer.__name__)\n")
    proc = subprocess.run([sys.executable, "-m", "tensorscope", "run", "--headless",
                           str(script)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "imported ZeroRedundancyOptimizer" in proc.stdout
