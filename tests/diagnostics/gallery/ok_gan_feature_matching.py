# CORRECT: a GAN generator with a feature-matching loss between the discriminator's features
# of fake and real batches (both sides through one module, made the same way).
# expect: none
import torch
import torch.nn.functional as F
from torch import nn
torch.manual_seed(0)
class D(nn.Module):
    def __init__(self):
        super().__init__(); self.feat = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2)); self.out = nn.Linear(16, 1)
    def forward(self, x): return self.out(self.feat(x))
G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8)); d = D()
og, od = torch.optim.Adam(G.parameters(), 2e-4), torch.optim.Adam(d.parameters(), 2e-4)
for step in range(6):
    real = torch.randn(16, 8); fake = G(torch.randn(16, 4))
    od.zero_grad()
    ld = F.binary_cross_entropy_with_logits(d(real), torch.ones(16, 1)) + F.binary_cross_entropy_with_logits(d(fake.detach()), torch.zeros(16, 1))
    ld.backward(); od.step()
    og.zero_grad()
    fm = F.mse_loss(d.feat(fake).mean(0), d.feat(real).mean(0))
    (fm + F.binary_cross_entropy_with_logits(d(fake), torch.ones(16, 1))).backward(); og.step()
