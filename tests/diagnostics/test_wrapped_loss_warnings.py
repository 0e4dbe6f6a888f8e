"""A warning a wrapped functional loss gives its caller names the script's line."""
from __future__ import annotations

import sys
import warnings

import torch
import torch.nn.functional as F
from torch import nn

from tensorscope.hooks.watch import Watch


def _mse_warnings(model: nn.Module) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        F.mse_loss(model(torch.randn(4, 3)), torch.randn(4))   # [4, 1] against [4]
        nn.MSELoss()(model(torch.randn(4, 3)), torch.randn(4))
    return [w for w in caught if "target size" in str(w.message)]


def test_the_broadcast_warning_of_mse_loss_names_the_callers_line():
    model = nn.Linear(3, 1)
    plain = _mse_warnings(model)
    with Watch(model, connect=False):
        assert getattr(F.mse_loss, "__tensorscope_wrapped__", False)
        watched = _mse_warnings(model)
    assert [(m.filename, m.lineno) for m in watched] == [(m.filename, m.lineno) for m in plain]
    assert watched[0].filename == __file__
    assert sys.modules["torch.nn.functional"].warnings is warnings   # put back on close


class _Scripted(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(x, y) + F.l1_loss(x, y)


def test_torchscript_still_compiles_the_functions_that_warn():
    """TorchScript resolves ``warnings.warn`` in ``torch.nn.functional``'s globals."""
    x, y = torch.randn(3, 2), torch.randn(3, 2)
    with Watch(nn.Linear(2, 2), connect=False):
        scripted = torch.jit.script(_Scripted())
        assert torch.equal(scripted(x, y), _Scripted()(x, y))


def _hook_warnings(model: nn.Module) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model(torch.randn(2, 3)).sum().backward()
    return [w for w in caught if "Full backward hook" in str(w.message)]


def test_a_module_backward_hooks_warning_names_the_line_that_called_backward():
    """A full backward hook on a module whose inputs need no gradient warns with
    ``stacklevel=5``: under the backward wrapper it named ``torch/_tensor.py``."""
    model = nn.Linear(3, 1)
    model.register_full_backward_hook(lambda m, gi, go: None)
    plain = _hook_warnings(model)
    with Watch(model, connect=False):
        watched = _hook_warnings(model)
    assert plain and plain[0].filename == __file__
    assert [(m.filename, m.lineno) for m in watched] == [(m.filename, m.lineno) for m in plain]
    assert sys.modules["torch.utils.hooks"].warnings is warnings   # put back on close
