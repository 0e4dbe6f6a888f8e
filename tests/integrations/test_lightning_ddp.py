"""The Lightning callback under DDP with two CPU processes: each watches with the
trainer's rank and writes its own report (``report="report-{rank}.json"``)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lightning.pytorch")

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def test_each_ddp_process_watches_with_the_trainers_rank(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENSORSCOPE_")}
    env.update(OMP_NUM_THREADS="1", TENSORSCOPE_NO_DISCOVERY="1",
               PYTHONPATH=str(REPO) + os.pathsep + env.get("PYTHONPATH", ""))
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    run = subprocess.run([sys.executable, str(HERE / "lightning_ddp_train.py"), str(tmp_path)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400,
                         check=False)
    assert run.returncode == 0, run.stderr[-4000:]
    reports = [json.loads((tmp_path / f"report-{r}.json").read_text()) for r in (0, 1)]
    assert [r["rank"] for r in reports] == [0, 1]
    assert all(r["world_size"] == 2 and r["steps"] == 3 for r in reports)
    assert all(len(r["losses"]) == 3 for r in reports)
