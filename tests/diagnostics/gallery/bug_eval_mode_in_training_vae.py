# MISTAKE: a VAE (pytorch/examples style) whose test() calls model.eval() but the
# next epoch's train() never calls model.train(): the encoder's Dropout and
# BatchNorm stay in eval mode while training. FIX: model.train() in train().
# expect: eval_mode_in_training "enc.1"
# expect: eval_mode_in_training "enc.3"
import torch
from torch import nn
import torch.nn.functional as F


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2))
        self.mu, self.logvar = nn.Linear(32, 8), nn.Linear(32, 8)
        self.dec = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 64))

    def forward(self, x):
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return torch.sigmoid(self.dec(z)), mu, logvar


def loss_function(recon, x, mu, logvar):
    bce = F.binary_cross_entropy(recon, x, reduction="sum")
    return bce - 0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())


torch.manual_seed(0)
model = VAE()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
data = torch.rand(64, 64)


def train():
    for i in range(0, 64, 16):
        x = data[i:i + 16]
        opt.zero_grad()
        recon, mu, logvar = model(x)
        loss_function(recon, x, mu, logvar).backward()
        opt.step()


def test():
    model.eval()
    with torch.no_grad():
        for i in range(0, 32, 16):
            x = torch.rand(16, 64)
            recon, mu, logvar = model(x)
            loss_function(recon, x, mu, logvar)


model.train()
for epoch in range(2):
    train()
    test()
