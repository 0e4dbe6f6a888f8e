"""Run as a script by test_lightning_ddp.py: Lightning DDP on two CPU processes
(Lightning's launcher starts the second by running this script again)."""
from __future__ import annotations

import os
import sys

import lightning.pytorch as L
import torch
from torch import nn

from tensorscope.integrations.lightning import TensorScopeCallback


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def main(out: str) -> None:
    torch.manual_seed(0)
    x = torch.randn(32, 4)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)),
                                         batch_size=4)
    cb = TensorScopeCallback(connect=False, report=os.path.join(out, "report-{rank}.json"))
    trainer = L.Trainer(max_epochs=1, limit_train_batches=3, accelerator="cpu", devices=2,
                        strategy="ddp", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, callbacks=[cb])
    trainer.fit(Tiny(), loader)
    # Lightning leaves the process group up after fit: a process exiting with gloo's
    # threads still running can abort in their teardown ('terminate called without an
    # active exception', exit -6; once in CI under load, after the reports were written)
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
