"""Item 1 of the hardening issue: every internal stage raises in turn (``TENSORSCOPE_FAULT``);
the script's output and exit code are those of a plain run, and the fault is reported."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from tensorscope.hooks.faults import STAGES
import reliability_runs as runs

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # 21 script runs

TRAIN = """
    import sys
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(4):
        x = torch.randn(5, 6)
        y = torch.randint(0, 3, (5,))
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"step {step} loss {loss.item():.6f}")
    with torch.no_grad():
        print("eval", model(torch.ones(1, 6)).tolist())
    sys.exit(3)
"""


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """The plain run, and one run under TensorScope per armed stage (four at a time)."""
    folder = tmp_path_factory.mktemp("faults")
    script = runs.write(folder, "train.py", TRAIN)

    def one(stage):
        report = folder / f"{stage}.json"
        res = runs.under(script, options=("--headless", "--report", str(report)),
                         TENSORSCOPE_FAULT=stage)
        return stage, res, report

    with ThreadPoolExecutor(4) as pool:
        results = {stage: (res, report) for stage, res, report in pool.map(one, STAGES)}
    return runs.plain(script), results


def test_the_plain_run_is_what_the_script_says(outcomes):
    base, _ = outcomes
    assert base.rc == 3
    assert base.out.count("loss") == 4


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_a_failing_stage_changes_nothing_the_script_sees(outcomes, stage):
    base, results = outcomes
    res, report = results[stage]
    assert res.rc == base.rc, res.err[-3000:]
    assert res.out == base.out, res.err[-3000:]
    assert "InjectedFault" in res.err, res.err[-3000:]
    assert "Traceback" not in res.err.split("InjectedFault")[0].split("internal error")[0]


@pytest.mark.parametrize("stage", ["forward_pre", "tensor_probe", "tensor_stats", "grad",
                                   "observer", "optimizer_pre", "graphs", "digest",
                                   "params_finish", "step_begin"])
def test_a_failing_stage_is_reported_once_and_capture_goes_on(outcomes, stage):
    _, results = outcomes
    res, report = results[stage]
    assert res.err.count("tensorscope: internal error in the") == 1, res.err[-3000:]
    data = json.loads(report.read_text())
    kinds = [f["kind"] for f in data["findings"]]
    assert kinds.count("internal_error") == 1
    found = next(f for f in data["findings"] if f["kind"] == "internal_error")
    assert "InjectedFault" in found["message"] and " (at " in found["message"]
    assert data["steps"] >= 4   # every step still ends and is counted
    if stage not in ("forward_pre",):
        assert data["roots"], "the module tree is still captured"
