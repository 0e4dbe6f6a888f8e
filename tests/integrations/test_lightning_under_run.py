"""An unmodified Lightning script under ``tensorscope run``: the Trainer adds the
callback itself (its ``callbacks_factory`` entry point), so steps are its own."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

import pytest

pytest.importorskip("lightning.pytorch")

from tensorscope.integrations.lightning_factory import run_callbacks

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""
    import json, sys
    import torch
    import lightning.pytorch as L
    from torch import nn

    torch.manual_seed(0)
    backpropagated = []

    class Spy(L.Callback):
        def on_before_backward(self, trainer, pl_module, loss):
            backpropagated.append(loss.item())

    class M(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 1))
        def training_step(self, batch, i):
            x, y = batch
            return nn.functional.mse_loss(self.net(x), y)
        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    g = torch.Generator().manual_seed(0)
    ds = torch.utils.data.TensorDataset(torch.randn(32, 6, generator=g), torch.randn(32, 1, generator=g))
    callbacks = [Spy()]
    if "--own-callback" in sys.argv:
        from tensorscope.integrations.lightning import TensorScopeCallback
        callbacks.append(TensorScopeCallback())
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        accumulate_grad_batches=2, callbacks=callbacks)
    trainer.fit(M(), torch.utils.data.DataLoader(ds, batch_size=8))
    # after fit, a loop of the script's own: its steps are found as without Lightning
    model = nn.Linear(6, 1)
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(4, 6))
    print("BACKPROPAGATED", json.dumps(backpropagated))
""")


def _run(tmp_path, *args: str) -> tuple[dict, list[float]]:
    script = tmp_path / "fit.py"
    script.write_text(SCRIPT)
    report = tmp_path / "report.json"
    env = dict(os.environ, TENSORSCOPE_NO_DISCOVERY="1")
    proc = subprocess.run([sys.executable, "-m", "tensorscope", "run", "--headless", "--report",
                           str(report), str(script), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    # Lightning's INFO line about the entry point's callback is not the script's output
    assert "from entry point 'tensorscope'" not in proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("BACKPROPAGATED"))
    return json.loads(report.read_text()), json.loads(line.split(" ", 1)[1])


@pytest.mark.skipif(not list(entry_points(group="lightning.pytorch.callbacks_factory")),
                    reason="tensorscope is not installed with its entry points")
@pytest.mark.parametrize("own", [False, True], ids=["unmodified", "own-callback"])
def test_an_unmodified_trainer_steps_once_per_optimizer_step_with_its_loss(tmp_path, own):
    report, backpropagated = _run(tmp_path, *(["--own-callback"] if own else []))
    assert len(backpropagated) == 4   # four batches, two per optimizer step
    losses = [loss for _, loss in report["losses"]]
    pairs = [backpropagated[0] + backpropagated[1], backpropagated[2] + backpropagated[3]]
    # two Lightning steps (the micro-batches' losses summed), then the script's own
    # three inference calls, one step each (not one step that waits for an optimizer)
    assert losses == pytest.approx(pairs, rel=1e-5)
    assert report["steps"] == 2 and report["inference_steps"] == 3


def test_the_factory_adds_nothing_outside_tensorscope_run():
    assert run_callbacks() == []
