# A VQ-VAE: the codebook is updated by an exponential moving average of the
# assigned encoder outputs inside forward (buffers changed in place under
# no_grad), the straight-through estimator z + (z_q - z).detach(), a commitment
# loss, evaluation with torch.inference_mode() in eval mode. Correct code.
# expect: none
import torch
from torch import nn
import torch.nn.functional as F


class VectorQuantizerEMA(nn.Module):
    def __init__(self, k=16, d=8, decay=0.99):
        super().__init__()
        self.decay = decay
        self.register_buffer("embed", torch.randn(k, d))
        self.register_buffer("cluster_size", torch.zeros(k))
        self.register_buffer("embed_avg", self.embed.clone())

    def forward(self, z):
        flat = z.reshape(-1, z.size(-1))
        d = flat.pow(2).sum(1, keepdim=True) - 2 * flat @ self.embed.t() + self.embed.pow(2).sum(1)
        idx = d.argmin(1)
        onehot = F.one_hot(idx, self.embed.size(0)).type(flat.dtype)
        z_q = (onehot @ self.embed).view_as(z)
        if self.training:
            with torch.no_grad():
                self.cluster_size.mul_(self.decay).add_(onehot.sum(0), alpha=1 - self.decay)
                self.embed_avg.mul_(self.decay).add_(onehot.t() @ flat, alpha=1 - self.decay)
                n = self.cluster_size.sum()
                size = (self.cluster_size + 1e-5) / (n + 16 * 1e-5) * n
                self.embed.copy_(self.embed_avg / size.unsqueeze(1))
        commit = F.mse_loss(z, z_q.detach())
        return z + (z_q - z).detach(), commit


class VQVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
        self.vq = VectorQuantizerEMA()
        self.dec = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 32))

    def forward(self, x):
        z_q, commit = self.vq(self.enc(x))
        return self.dec(z_q), commit


torch.manual_seed(0)
model = VQVAE()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(6):
    x = torch.randn(16, 32)
    recon, commit = model(x)
    loss = F.mse_loss(recon, x) + 0.25 * commit
    opt.zero_grad()
    loss.backward()
    opt.step()
model.eval()
with torch.inference_mode():
    for _ in range(2):
        recon, _ = model(torch.randn(16, 32))
