"""A GradScaler hides overflowed gradients from ``non_finite`` only while an enabled one
exists in this session: not one built with ``enabled=False``, not an earlier session's."""
from __future__ import annotations

import gc

import pytest
import torch
from torch import nn

import tensorscope
from sinks import FindingSink
from tensorscope.hooks.diagnostics import scaler


@pytest.fixture(autouse=True)
def no_cached_answer() -> None:
    """Each test starts with no answer cached by an earlier test (set by hand, so that
    the tests say the same without ``forget()``)."""
    scaler._LIVE.update(at=-1e9, refs=[])


class RowNorm(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x / (torch.sqrt((x * x).sum(1, keepdim=True)) + 1e-6)


def _nan_backward() -> FindingSink:
    """Three steps whose backward makes NaN at ``norm``: rows with every ReLU unit off
    give RowNorm a row of zeros, where sqrt's derivative is infinite."""
    torch.manual_seed(0)
    model = nn.Sequential()
    model.add_module("fc1", nn.Linear(8, 4))
    model.add_module("act", nn.ReLU())
    model.add_module("norm", RowNorm())
    model.add_module("fc2", nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    w = tensorscope.watch(model, opt, connect=False)
    sink = FindingSink()
    w.session.add_sink(sink)
    for _ in range(3):
        x, y = torch.randn(32, 8), torch.randn(32, 1)
        x[:8] = -10.0 * model.fc1.weight.detach().sum(0).sign()   # every unit off
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    w.close()
    return sink


def test_nan_backward_is_named_without_a_scaler() -> None:
    assert ("non_finite", "norm") in _nan_backward().findings


def test_a_disabled_grad_scaler_hides_nothing() -> None:
    """nanoGPT keeps a ``GradScaler(enabled=False)`` for bfloat16: it never skips a step."""
    kept = torch.amp.GradScaler("cpu", enabled=False)
    assert ("non_finite", "norm") in _nan_backward().findings
    del kept


def test_an_earlier_sessions_scaler_is_forgotten() -> None:
    """An enabled scaler seen by the previous session (its answer cached), gone since:
    the next session in the same process still names the NaN."""
    kept = torch.amp.GradScaler("cpu")
    tensorscope.watch(nn.Linear(2, 2), connect=False).close()
    assert scaler.grad_scaler_in_use()
    del kept
    gc.collect()
    assert ("non_finite", "norm") in _nan_backward().findings


def test_a_new_sessions_scaler_is_seen_at_once() -> None:
    """The scalers found by an earlier session's walk are not the next session's: its
    own GradScaler is seen (ineffective_clipping reads them) without waiting 30 s."""
    scaler._LIVE.update(at=-1e9, refs=[])
    assert scaler.live_scalers() == []    # walked: none yet
    w = tensorscope.watch(nn.Linear(2, 2), connect=False)
    made = torch.amp.GradScaler("cpu")
    assert made in scaler.live_scalers()
    w.close()
