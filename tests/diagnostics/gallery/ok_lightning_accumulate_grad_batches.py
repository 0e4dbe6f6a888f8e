# CORRECT: a Lightning Trainer with accumulate_grad_batches=4: training_step returns the
# mean loss of each micro-batch and Lightning divides it by 4 before backward().
# requires: lightning
# expect: none
import os
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")
import lightning as L
import torch
from torch import nn


class Classifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
        self.loss = nn.CrossEntropyLoss()

    def training_step(self, batch, _):
        x, y = batch
        return self.loss(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


torch.manual_seed(0)
ds = torch.utils.data.TensorDataset(torch.randn(256, 8), torch.randint(0, 3, (256,)))
trainer = L.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False, accumulate_grad_batches=4)
trainer.fit(Classifier(), torch.utils.data.DataLoader(ds, batch_size=16))
