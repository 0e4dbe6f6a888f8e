# MISTAKE: a LightningModule whose forward ends in softmax, trained with
# F.cross_entropy (which applies log-softmax itself). FIX: return the logits.
# requires: lightning
# expect: double_activation ""
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
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))

    def forward(self, x):
        return F.softmax(self.net(x), dim=-1)

    def training_step(self, batch, _):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


g = torch.Generator().manual_seed(0)
ds = torch.utils.data.TensorDataset(torch.randn(64, 8, generator=g),
                                    torch.randint(0, 3, (64,), generator=g))
torch.manual_seed(0)
trainer = L.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False)
trainer.fit(Classifier(), torch.utils.data.DataLoader(ds, batch_size=16, shuffle=True))
