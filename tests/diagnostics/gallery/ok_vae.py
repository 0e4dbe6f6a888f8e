# CORRECT: a small VAE: sigmoid decoder output with binary_cross_entropy, the
# reparameterisation trick, a KL term with exp(logvar).
# expect: none
import torch
import torch.nn.functional as F
from torch import nn


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 32), nn.ReLU())
        self.mu, self.logvar = nn.Linear(32, 8), nn.Linear(32, 8)
        self.dec = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 64), nn.Sigmoid())

    def forward(self, x):
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)
        return self.dec(z), mu, logvar


torch.manual_seed(0)
model = VAE()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(5):
    x = torch.rand(16, 64)
    opt.zero_grad()
    recon, mu, logvar = model(x)
    kl = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
    loss = F.binary_cross_entropy(recon, x) + kl
    loss.backward()
    opt.step()
