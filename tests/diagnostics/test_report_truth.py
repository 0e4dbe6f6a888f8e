"""The report tells the truth: step kinds, losses, last training call, signatures,
and checkpoint recomputation that is no step or call of its own."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

import tensorscope


class GPTish(nn.Module):
    """Returns ``(logits, loss)`` like nanoGPT; the loss only when targets are given."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 16)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None):
        logits = self.head(torch.relu(self.fc(x)))
        return logits, (F.cross_entropy(logits, y) if y is not None else None)


def _report(tmp_path: Path, run) -> dict:
    path = tmp_path / "r.json"
    run(str(path))
    return json.loads(path.read_text())


def test_steps_losses_and_last_training_call(tmp_path: Path) -> None:
    """36 optimizer steps and 3 evaluation forwards: 36 steps, 3 inference steps, a
    loss per step of each kind, inputs of the training batch, both signatures."""
    def run(report: str) -> None:
        torch.manual_seed(0)
        model = GPTish()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with tensorscope.watch(model, opt, connect=False, report=report):
            for _ in range(36):
                x, y = torch.randn(64, 8), torch.randint(0, 4, (64,))
                _, loss = model(x, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            with torch.no_grad():
                for _ in range(3):
                    model(torch.randn(256, 8), torch.randint(0, 4, (256,)))

    data = _report(tmp_path, run)
    assert data["tensorscope_report"] == 1
    assert data["steps"] == 36 and data["inference_steps"] == 3
    assert len(data["losses"]) == 36 and len(data["eval_losses"]) == 3
    root = data["roots"][0]
    fc = {m["path"]: m for m in root["modules"]}["fc"]
    assert fc["calls"] == 39
    assert fc["inputs"][0]["shape"] == [64, 8]          # the training batch, not the last
    sigs = {(s["mode"], s["inputs"][0]["shape"][0]): s["calls"] for s in fc["signatures"]}
    assert sigs == {("train", 64): 36, ("inference", 256): 3}


def test_functional_loss_curve_and_eval_loss(tmp_path: Path) -> None:
    """A loss computed in the loop (no loss module) fills ``losses``; a functional
    loss in an evaluation fills ``eval_losses``."""
    def run(report: str) -> None:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        with tensorscope.watch(model, opt, connect=False, report=report):
            for _ in range(5):
                x = torch.randn(32, 8)
                loss = ((model(x) - x[:, :1]) ** 2).sum() / 32
                opt.zero_grad()
                loss.backward()
                opt.step()
            with torch.no_grad():
                for _ in range(2):
                    x = torch.randn(32, 8)
                    F.mse_loss(model(x), x[:, :1])

    data = _report(tmp_path, run)
    assert [s for s, _ in data["losses"]] == [0, 1, 2, 3, 4]
    assert len(data["eval_losses"]) == 2
    assert data["steps"] == 5 and data["inference_steps"] == 2


def test_an_evaluation_summed_by_nll_loss_fills_eval_losses(tmp_path: Path) -> None:
    """pytorch/examples' MNIST test loop: ``log_softmax`` in the model, the loss
    ``F.nll_loss(output, target, reduction='sum').item()`` under ``no_grad`` (its
    ``eval_losses`` was empty: ``F.nll_loss`` was not one of the losses looked at)."""
    def run(report: str) -> None:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(8, 4), nn.LogSoftmax(dim=1))
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        with tensorscope.watch(model, opt, connect=False, report=report):
            for _ in range(2):
                x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))
                opt.zero_grad()
                F.nll_loss(model(x), y).backward()
                opt.step()
            model.eval()
            with torch.no_grad():
                for _ in range(3):
                    x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))
                    F.nll_loss(model(x), y, reduction="sum").item()

    data = _report(tmp_path, run)
    assert data["steps"] == 2 and data["inference_steps"] == 3
    assert [s for s, _ in data["eval_losses"]] == [2, 3, 4]
    assert all(v > 16 for _, v in data["eval_losses"])   # the sums, not means


@pytest.mark.parametrize("reentrant", [True, False])
def test_checkpoint_recomputation_is_part_of_the_step(tmp_path: Path, reentrant: bool) -> None:
    """Recomputed calls during backward start no step and count as no call."""
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(8, 8), nn.Tanh())
                                        for _ in range(3))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for b in self.blocks:
                x = checkpoint(b, x, use_reentrant=reentrant)
            return x.sum(1)

    def run(report: str) -> None:
        torch.manual_seed(0)
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        with tensorscope.watch(model, opt, connect=False, report=report, mode="full"):
            for _ in range(7):
                x = torch.randn(4, 8, requires_grad=reentrant)
                loss = model(x).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()

    data = _report(tmp_path, run)
    assert data["steps"] == 7 and data["inference_steps"] == 0
    assert len(data["losses"]) == 7
    mods = {m["path"]: m for m in data["roots"][0]["modules"]}
    assert mods["blocks.0"]["calls"] == 7 and mods["blocks.2.1"]["calls"] == 7
    assert not [f for f in data["findings"] if f["severity"] in ("warning", "error")]


def test_grad_scaler_loss_is_unscaled(tmp_path: Path) -> None:
    """``scaler.scale(loss).backward()``: the recorded loss is the loss, not its scaled product."""
    def run(report: str) -> None:
        torch.manual_seed(0)
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        scale = torch.full((1,), 1024.0)
        with tensorscope.watch(model, opt, connect=False, report=report):
            for _ in range(3):
                loss = model(torch.ones(2, 4)).pow(2).mean()
                seen.append(loss.item())
                opt.zero_grad()
                (loss * scale).backward()     # what GradScaler.scale does
                opt.step()

    seen: list[float] = []
    data = _report(tmp_path, run)
    assert [v for _, v in data["losses"]] == pytest.approx(seen)
