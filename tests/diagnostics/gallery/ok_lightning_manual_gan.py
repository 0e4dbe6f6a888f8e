# A Lightning GAN with manual optimization: two optimizers, manual_backward,
# toggle_optimizer, fake.detach() for the discriminator. Correct code.
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


class GAN(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
        self.D = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))

    def training_step(self, batch, _):
        (real,) = batch
        opt_g, opt_d = self.optimizers()
        z = torch.randn(real.size(0), 4)
        self.toggle_optimizer(opt_g)
        fake = self.G(z)
        g_loss = F.binary_cross_entropy_with_logits(self.D(fake), torch.ones(real.size(0), 1))
        opt_g.zero_grad()
        self.manual_backward(g_loss)
        opt_g.step()
        self.untoggle_optimizer(opt_g)
        self.toggle_optimizer(opt_d)
        d_loss = (F.binary_cross_entropy_with_logits(self.D(real), torch.ones(real.size(0), 1))
                  + F.binary_cross_entropy_with_logits(self.D(fake.detach()),
                                                       torch.zeros(real.size(0), 1)))
        opt_d.zero_grad()
        self.manual_backward(d_loss)
        opt_d.step()
        self.untoggle_optimizer(opt_d)

    def configure_optimizers(self):
        return (torch.optim.Adam(self.G.parameters(), lr=2e-4),
                torch.optim.Adam(self.D.parameters(), lr=2e-4))


torch.manual_seed(0)
ds = torch.utils.data.TensorDataset(torch.randn(64, 8))
trainer = L.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False,
                    enable_checkpointing=False, enable_progress_bar=False,
                    enable_model_summary=False)
trainer.fit(GAN(), torch.utils.data.DataLoader(ds, batch_size=16))
