"""An unmodified Lightning DDP script (two CPU processes) under ``tensorscope run``:
Lightning starts rank 1 by running the script again, and that rank is instrumented
too (``training.relaunch``), so the job's report has both ranks, with numbers unchanged."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("lightning.pytorch")

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import torch
    import lightning.pytorch as L
    from torch import nn

    class M(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
        def training_step(self, batch, i):
            x, y = batch
            return nn.functional.cross_entropy(self.net(x), y)
        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    if __name__ == "__main__":
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(0)
        ds = torch.utils.data.TensorDataset(torch.randn(32, 6, generator=g),
                                            torch.randint(0, 2, (32,), generator=g))
        trainer = L.Trainer(max_epochs=1, accelerator="cpu", devices=2, strategy="ddp",
                            logger=False, enable_checkpointing=False, enable_progress_bar=False,
                            enable_model_summary=False)
        model = M()
        trainer.fit(model, torch.utils.data.DataLoader(ds, batch_size=8))
        print(f"WEIGHTS {trainer.global_rank} {model.net[0].weight.detach().sum().item():.8f}")
""")


def _run(cmd: list[str], cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TENSORSCOPE_") and k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE",
                                                              "MASTER_ADDR", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", TENSORSCOPE_NO_DISCOVERY="1", PYTHONUNBUFFERED="1")
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=400,
                          check=False)


def _weights(out: str) -> dict[str, str]:
    return dict(re.findall(r"WEIGHTS (\d) (-?\d+\.\d+)", out))


def test_the_rank_lightning_starts_again_is_instrumented_and_numbers_unchanged(tmp_path):
    (tmp_path / "train.py").write_text(SCRIPT)
    plain = _run([sys.executable, "train.py"], tmp_path)
    assert plain.returncode == 0, plain.stderr[-3000:]
    run = _run([sys.executable, "-m", "tensorscope", "run", "--headless", "--report", "r.json",
                "train.py"], tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert _weights(run.stdout) == _weights(plain.stdout) and len(_weights(plain.stdout)) == 2
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["world_size"] == 2 and report["missing_ranks"] == []
    assert [r["rank"] for r in report["ranks"]] == [0, 1]
    assert all(r["steps"] == 2 for r in report["ranks"])   # 32 samples, 2 ranks, batch 8
    assert not report["findings"]
