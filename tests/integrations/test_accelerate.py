"""The transformers callback under ``accelerate launch`` with two processes (CPU, gloo)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("accelerate")
pytest.importorskip("transformers")

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def test_each_process_watches_with_its_own_rank(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENSORSCOPE_")}
    # accelerate's CPU launcher needs MPI; its torchrun launcher runs CPU processes
    # too when told to use the CPU (the Trainer's use_cpu, gloo)
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", ACCELERATE_USE_CPU="1",
               TENSORSCOPE_NO_DISCOVERY="1",
               PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
           "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
           "--dynamo_backend", "no", "--main_process_port", "0",
           str(HERE / "accelerate_train.py"), str(tmp_path)]
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
                         timeout=400)
    assert run.returncode == 0, run.stderr[-4000:]
    reports = [json.loads((tmp_path / f"report-{r}.json").read_text()) for r in (0, 1)]
    assert [r["rank"] for r in reports] == [0, 1]
    assert all(r["world_size"] == 2 and r["steps"] == 3 for r in reports)
    for r in reports:
        assert [s for s, _ in r["scalars"]["learning_rate"]] == [0, 1, 2]
        assert not [f for f in r["findings"] if f["severity"] != "info"], r["findings"]
