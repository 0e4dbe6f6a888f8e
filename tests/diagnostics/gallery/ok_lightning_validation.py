# CORRECT: a Lightning Trainer with a validation loop; the loss is F.cross_entropy in
# training_step (no loss module), so the loss curve comes from backward().
# requires: lightning
# expect: none
import os
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")
import lightning as L
import torch
import torch.nn.functional as F
from torch import nn


class Classifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 3))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, _):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def validation_step(self, batch, _):
        x, y = batch
        self.log("val_loss", F.cross_entropy(self(x), y))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def loader(n, seed):
    g = torch.Generator().manual_seed(seed)
    ds = torch.utils.data.TensorDataset(torch.randn(n, 8, generator=g),
                                        torch.randint(0, 3, (n,), generator=g))
    return torch.utils.data.DataLoader(ds, batch_size=16)


torch.manual_seed(0)
trainer = L.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False, num_sanity_val_steps=0)
trainer.fit(Classifier(), loader(64, 0), loader(32, 1))
