"""The step end's shared parts: parameter rows of steps that take no numbers."""
from __future__ import annotations

import torch
from torch import nn

from tensorscope.common.events import StepSummary
from tensorscope.hooks.watch import Watch
from sinks import Log


def _summaries(steps: int, freeze_at: int | None = None) -> list[StepSummary]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    log = Log()
    with Watch(model, opt, connect=False, stats_every=3) as w:
        w.session.add_sink(log)
        for step in range(steps):
            if step == freeze_at:
                model[0].bias.requires_grad_(False)
            opt.zero_grad()
            model(torch.randn(5, 3)).pow(2).mean().backward()
            opt.step()
    return [m for m in log.messages if isinstance(m, StepSummary)]


def test_steps_without_numbers_share_their_rows_and_numbers_never_reach_them():
    s = _summaries(7)
    assert [bool(x.params[0]["norm"]) for x in s] == [True, False, False, True, False, False,
                                                       True]
    assert s[1].params is s[2].params is s[4].params   # one list while nothing changes
    assert s[3].params is not s[1].params
    for x in (s[1], s[2], s[4], s[5]):   # a statistics step in between filled its own rows
        assert all(r["norm"] is None and r["grad_norm"] is None and r["update_ratio"] is None
                   for r in x.params)
    assert all(r["grad_norm"] > 0 for r in s[3].params)


def test_a_flag_that_changes_shows_in_the_next_rows_only():
    s = _summaries(6, freeze_at=4)
    bias = [next(r for r in x.params if r["name"] == "0.bias")["requires_grad"] for x in s]
    assert bias == [True, True, True, True, False, False]
    assert s[4].params is not s[2].params and s[4].params is s[5].params


def test_the_inlined_call_rows_are_those_of_digest(monkeypatch):
    """``_batch`` inlines ``digest``: it gives the columns of the call-by-call form,
    for statistics steps and others."""
    from tensorscope.hooks import stepend

    kept: list = []
    real = stepend._batch

    def both(calls, values, rank, step, signatures, skip_failed):
        fast = real(calls, values, rank, step, signatures, skip_failed)
        slow = stepend._batch_by_digest(calls, values, rank, step, signatures, skip_failed)
        kept.append((fast, slow))
        return fast

    monkeypatch.setattr(stepend, "_batch", both)
    _summaries(4)
    assert len(kept) == 4
    for fast, slow in kept:
        assert fast.message().columns == slow.message().columns
        assert (fast.any_flags, fast.all_flags, fast.any_stats, fast.dense) == (
            slow.any_flags, slow.all_flags, slow.any_stats, slow.dense)
    assert any(f.any_stats for f, _ in kept) and not all(f.any_stats for f, _ in kept)
