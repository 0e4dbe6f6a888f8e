# BUG: a GAN whose discriminator optimizer never zeroes its gradients; the generator's
# backward through D adds into them too, so opt_d steps on the sum of every past step.
# expect: grad_accumulation ""
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()
for step in range(6):
    real = torch.randn(32, 2) + 3
    z = torch.randn(32, 8)
    fake = G(z)
    d_loss = bce(D(real), torch.ones(32, 1)) + bce(D(fake.detach()), torch.zeros(32, 1))
    d_loss.backward()
    opt_d.step()
    opt_g.zero_grad()
    g_loss = bce(D(fake), torch.ones(32, 1))
    g_loss.backward()
    opt_g.step()
    print(step, round(d_loss.item(), 4), round(g_loss.item(), 4))
