# CORRECT: Lightning's StochasticWeightAveraging on a model with BatchNorm: after the
# last epoch it runs one more epoch of training steps without backward, in training
# mode with gradients on and BatchNorm momentum=None, to recompute the averaged
# model's BatchNorm statistics. That is no evaluation left in train mode and no
# forgotten no_grad (train_mode_in_eval, grad_tracking_in_inference).
# requires: lightning
# expect: none
import os
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")
import lightning as L
import torch
from lightning.pytorch.callbacks import StochasticWeightAveraging
from torch import nn


class Classifier(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(),
                                 nn.Dropout(0.1), nn.Linear(32, 3))

    def training_step(self, batch, _):
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


torch.manual_seed(0)
ds = torch.utils.data.TensorDataset(torch.randn(96, 8), torch.randint(0, 3, (96,)))
trainer = L.Trainer(max_epochs=2, accelerator="cpu", devices=1, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False,
                    callbacks=[StochasticWeightAveraging(swa_lrs=1e-2, swa_epoch_start=1)])
trainer.fit(Classifier(), torch.utils.data.DataLoader(ds, batch_size=16))
