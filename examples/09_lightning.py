"""Example 9: a PyTorch Lightning Trainer with ``TensorScopeCallback``.

A LightningModule regresses the sum of 6 inputs with two linear layers and a
functional ``mse_loss`` (no loss module for TensorScope to find: the callback
takes the loss Lightning backpropagates). The Trainer validates after each
epoch. The callback takes ``tensorscope.watch``'s options (``listen``,
``record``, ``mode`` ...)::

    trainer = L.Trainer(callbacks=[TensorScopeCallback()])

Run it::

    python examples/09_lightning.py
    tensorscope run examples/09_lightning.py
    tensorscope run --headless --report report.json examples/09_lightning.py --steps 4

(Under ``tensorscope run`` the callback drives the run's capture; run alone,
it attaches its own watch and connects to a running ``tensorscope gui``.)

What to look at in TensorScope:

* Each training batch is a training step, its loss the value Lightning
  backpropagated; each validation batch is an inference step labelled
  ``validation`` (the sanity check's ``sanity_check``).
* The module graph: ``encoder.0`` (Linear 6->16), ``encoder.1`` (ReLU),
  ``head`` (Linear 16->1), inside the LightningModule ``Regressor``.

What you should see: no findings.
"""
from __future__ import annotations

import argparse

import lightning.pytorch as L
import torch
from torch import nn

from tensorscope.integrations.lightning import TensorScopeCallback


class Regressor(L.LightningModule):
    """Two linear layers; the loss is functional."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(6, 16), nn.ReLU())
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", nn.functional.mse_loss(self(x), y))

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


def loader(n: int, seed: int) -> torch.utils.data.DataLoader:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 6, generator=g)
    data = torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True))
    return torch.utils.data.DataLoader(data, batch_size=16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=50, help="training batches per epoch")
    args = parser.parse_args()
    torch.manual_seed(0)
    trainer = L.Trainer(max_epochs=args.epochs, limit_train_batches=args.steps,
                        limit_val_batches=2, accelerator="cpu", devices=1, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[TensorScopeCallback()])
    trainer.fit(Regressor(), loader(16 * args.steps, 0), loader(32, 1))
    print(f"done: {trainer.global_step} steps")


if __name__ == "__main__":
    main()
