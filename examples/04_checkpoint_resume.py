"""Example 4: save a checkpoint, then resume training from it.

The checkpoint holds everything needed to continue exactly: the model's and
the optimizer's ``state_dict`` (AdamW's moment estimates and step counts),
the epoch and the last loss. It is written with ``torch.save`` and read back
with ``torch.load(..., weights_only=True)``, which unpickles only tensors and
plain containers, never arbitrary code: the safe way to open a checkpoint.

To show a real resume, the second half of the run builds a *fresh* model and
optimizer (as a new process would), loads the checkpoint into them with
``load_state_dict``, checks that every tensor came back bit for bit, and
trains on from the next epoch. The checkpoint goes to a temporary folder
that is deleted at the end.

Run it::

    tensorscope run examples/04_checkpoint_resume.py
    tensorscope run --headless --report report.json examples/04_checkpoint_resume.py --epochs 2 --steps 2
    python examples/04_checkpoint_resume.py

What to look at in TensorScope:

* Two root modules of type ``Regressor``: the model trained before the
  checkpoint and the one resumed from it. They have the same structure and
  shapes; the step counter carries on across the resume.
* The loss plot continues smoothly at the resume: no jump back up, because
  the weights *and* the optimizer state were restored. (Restoring only the
  model would restart AdamW's moment estimates, which can show as a bump.)
* The parameter table after the resume: update ratios continue where they
  were.

What you should see: no findings.
"""
from __future__ import annotations

import argparse
import os
import tempfile

import torch
from torch import nn


class Regressor(nn.Module):
    """A small MLP, 16 -> 32 -> 32 -> 4, with LayerNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(16, 32), nn.LayerNorm(32), nn.GELU(),
            nn.Linear(32, 32), nn.GELU(),
        )
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def make_data(n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs ``[n, 16]`` and targets ``[n, 4]`` from a fixed random linear map."""
    g = torch.Generator().manual_seed(1)
    weight = torch.randn(16, 4, generator=g) / 4
    x = torch.randn(n, 16, generator=g)
    y = torch.tanh(x @ weight) + 0.05 * torch.randn(n, 4, generator=g)
    return x.to(device), y.to(device)


def run_epochs(model: nn.Module, optimizer: torch.optim.Optimizer, data: tuple,
               epochs: range, steps: int) -> float:
    """Train for ``epochs`` (``steps`` batches each); returns the last loss."""
    x_all, y_all = data
    loss_fn = nn.MSELoss()
    batch = len(x_all) // steps
    loss_value = float("nan")
    model.train()
    for epoch in epochs:
        perm = torch.randperm(len(x_all), device=x_all.device)
        for i in range(steps):
            idx = perm[i * batch:(i + 1) * batch]
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x_all[idx]), y_all[idx])
            loss.backward()
            optimizer.step()
            loss_value = loss.item()
        print(f"epoch {epoch}: loss {loss_value:.5f}")
    return loss_value


def save_checkpoint(path: str, model: nn.Module, optimizer: torch.optim.Optimizer,
                    epoch: int, loss: float) -> None:
    """Everything needed to resume: weights, optimizer state, epoch, loss."""
    torch.save({"epoch": epoch, "loss": loss, "model": model.state_dict(),
                "optimizer": optimizer.state_dict()}, path)


def resume(path: str, device: torch.device) -> tuple[nn.Module, torch.optim.Optimizer, int, float]:
    """A fresh model and optimizer with the checkpoint's state loaded into them."""
    checkpoint = torch.load(path, map_location=device, weights_only=True)
    model = Regressor().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    return model, optimizer, checkpoint["epoch"], checkpoint["loss"]


def assert_same_state(a: dict, b: dict) -> None:
    """Every tensor of two state dicts is equal (nested, for optimizer state)."""
    assert a.keys() == b.keys(), (a.keys(), b.keys())
    for key in a:
        if isinstance(a[key], dict):
            assert_same_state(a[key], b[key])
        elif isinstance(a[key], torch.Tensor):
            assert torch.equal(a[key], b[key]), f"{key} differs after loading"
        else:
            assert a[key] == b[key], f"{key}: {a[key]} != {b[key]}"


def main() -> None:
    """Parse the arguments and train."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6, help="total epochs (half before the checkpoint)")
    parser.add_argument("--steps", type=int, default=16, help="training steps per epoch")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = make_data(2048, device)
    first_half = max(args.epochs // 2, 1)

    model = Regressor().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss = run_epochs(model, optimizer, data, range(first_half), args.steps)

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "checkpoint.pt")
        save_checkpoint(path, model, optimizer, epoch=first_half - 1, loss=loss)
        print(f"saved epoch {first_half - 1} (loss {loss:.5f}) to {path}")
        saved_model, saved_optimizer = model.state_dict(), optimizer.state_dict()
        del model, optimizer  # from here on only the checkpoint is used

        model, optimizer, epoch, loss = resume(path, device)
        assert_same_state(saved_model, model.state_dict())
        assert_same_state(saved_optimizer["state"], optimizer.state_dict()["state"])
        print(f"resumed at epoch {epoch + 1} (checkpoint loss {loss:.5f})")

    run_epochs(model, optimizer, data, range(epoch + 1, args.epochs), args.steps)


if __name__ == "__main__":
    main()
