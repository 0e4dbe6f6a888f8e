"""The overhead budget (``--max-overhead``): rates chosen from the meter's
readings, the finite checks kept, the floor said once."""
from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch
from torch import nn

from hooks_zoo import watch
from tensorscope.common.events import Finding
from tensorscope.hooks.budget import EVAL_EVERY, META_EVERY, WARMUP_STEPS, Budget
from tensorscope.hooks.step_records import StepBuffer

WALL = 1_000_000   # 1 ms steps


class _Feed:
    """Synthetic meter readings: a plain step costs ``plain`` of its wall time,
    a statistics step ``plain + extra``; the rates the budget applies decide
    which steps are statistics steps, as in the capture."""

    def __init__(self, pct: float, mode: str = "default", stats_every: int = 10) -> None:
        self.rates = (0, 0, 0)
        self.warnings: list[str] = []
        self.budget = Budget(pct, mode, stats_every, self._apply, self.warnings.append)
        self.index = 0

    def _apply(self, stats_every: int, params_every: int, meta_every: int) -> None:
        self.rates = (stats_every, params_every, meta_every)

    def run(self, steps: int, plain: float, extra: float, meta_saving: float = 0.0) -> None:
        for _ in range(steps):
            s, p, m = self.rates
            step = StepBuffer(self.index, self.index % s == 0, self.index % p == 0,
                              self.index % m == 0)
            step.calls = [object()] * 7
            cost = plain - (meta_saving if m > 1 and not step.meta_step else 0.0)
            if step.stats_step or step.param_step:
                cost += extra
            step.overhead_ns, step.wall_ns = int(cost * WALL), int((1 + cost - plain) * WALL)
            self.budget.step_finished(step)
            self.index += 1


def test_the_statistics_interval_grows_just_enough():
    feed = _Feed(5.0)
    assert feed.rates == (10, 10, 1)
    # plain steps 2% of the step, a statistics step 50% more: statistics every k
    # steps fit when 0.5 / k <= 0.05 * 0.98 / 0.95 - 0.02 (k >= 15.8): every 20
    feed.run(WARMUP_STEPS + 10 * EVAL_EVERY, plain=0.02, extra=0.5)
    assert feed.rates == (20, 20, 1)
    assert feed.budget.rates() == {"max_overhead": 5.0, "stats_every": 20,
                                   "params_every": 20, "meta_every": 1}
    assert not feed.warnings


def test_rates_come_back_when_the_cost_falls_but_not_on_one_reading():
    feed = _Feed(5.0)
    feed.run(WARMUP_STEPS + 10 * EVAL_EVERY, plain=0.02, extra=2.0)
    assert feed.rates[0] == 80          # 2.0 / k <= 0.0316
    feed.run(2 * EVAL_EVERY, plain=0.02, extra=0.1)
    assert feed.rates[0] == 80          # two readings are not enough
    feed.run(40 * EVAL_EVERY, plain=0.02, extra=0.1)
    assert feed.rates == (10, 10, 1)    # back to the configured --stats-every


def test_the_floor_over_budget_sheds_metadata_then_says_so_once_with_numbers():
    feed = _Feed(10.0)
    feed.run(WARMUP_STEPS + 4 * EVAL_EVERY, plain=0.3, extra=0.2, meta_saving=0.05)
    assert feed.rates[2] == META_EVERY
    feed.run(40 * EVAL_EVERY, plain=0.3, extra=0.2, meta_saving=0.05)
    assert feed.rates[0] == feed.rates[1] > 1000      # statistics as rare as they go
    assert len(feed.warnings) == 1
    text = feed.warnings[0]
    # with metadata reused, a plain step costs 0.25 of a step that now takes 0.95 ms
    assert "the hooks alone cost 26% on this model" in text
    assert "(0.95 ms steps, 7 module calls)" in text and "budget is 10%" in text
    assert "raise --max-overhead or use --mode shapes" in text


def test_full_mode_first_takes_exact_statistics_every_stats_every_steps():
    feed = _Feed(5.0, mode="full", stats_every=10)
    assert feed.rates == (1, 10, 1)
    feed.run(WARMUP_STEPS + 2 * EVAL_EVERY, plain=0.3, extra=0.0)
    assert feed.rates[0] == 10


@pytest.mark.parametrize("bad", [0, -1, 100, 250, "lots", float("nan")])
def test_a_bad_budget_is_refused_with_a_message(bad):
    model = nn.Linear(3, 2)
    with pytest.raises(ValueError, match="max-overhead"):
        watch(model, max_overhead=bad)


def test_the_cli_refuses_a_bad_budget(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    proc = subprocess.run([sys.executable, "-m", "tensorscope", "run", "--headless",
                           "--max-overhead", "150", str(script)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "between 0 and 100" in proc.stderr
    assert "ran" not in proc.stdout


def test_an_impossible_budget_keeps_every_finite_check_and_says_so_once():
    """A real MLP under a budget no hook can meet: the finding comes once,
    statistics become rare, and a NaN injected late is still caught at the
    module that made it, at its own step."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x, y = torch.randn(8, 20), torch.randint(0, 4, (8,))
    w, log = watch([model, loss_fn], opt, max_overhead=0.001, discover_losses=False)
    nan_step = 90
    with w:
        for i in range(nan_step + 1):
            if i == nan_step:
                with torch.no_grad():
                    model[2].bias[0] = math.nan
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
    budget = [f for f in log.of(Finding) if f.kind == "overhead_budget"]
    assert len(budget) == 1 and "the hooks alone cost" in budget[0].message
    last = log.summaries()[-1].rates
    assert last["max_overhead"] == 0.001 and last["stats_every"] > 1000
    assert last["meta_every"] == META_EVERY
    # finite flags every step, the NaN's producer named at its step
    steps = {d.step for d in log.digests()}
    assert steps == set(range(nan_step + 1))
    bad = [d.path for d in log.digests(nan_step) if d.root == 0 and d.path and not d.finite]
    assert bad == ["2"]
    assert all(d.finite for d in log.digests(nan_step - 1))


def test_reused_metadata_catches_up_at_the_next_refresh_and_on_an_exception():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 5), nn.Linear(5, 3))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    w, log = watch(model, opt)
    w.capture.set_rates(10, 10, 4)     # metadata read afresh every 4th step
    with w:
        for i in range(9):
            batch = 2 if i < 5 else 7  # the batch grows at step 5 (not a refresh step)
            opt.zero_grad()
            model(torch.randn(batch, 6)).sum().backward()
            opt.step()
        with pytest.raises(RuntimeError):
            model(torch.randn(3, 9))   # wrong width at step 9 (no refresh either)
    shape = {d.step: d.outputs[0]["shape"] for d in log.digests() if d.path == "0" and d.step < 9}
    assert shape[4] == [2, 5] and shape[5] == [2, 5]     # between refreshes: last step's
    assert shape[8] == [7, 5]                            # refreshed at step 8
    err = [f for f in log.of(Finding) if f.kind == "exception"]
    assert err and "[3, 9]" in err[0].message           # described as they were
