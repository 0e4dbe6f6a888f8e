# Bounded outputs against targets in their range: a sigmoid decoder against
# pixels scaled to [0, 1], a tanh generator head against data in [-1, 1]
# (Huber), and a least-squares GAN discriminator with a sigmoid against smoothed
# labels 0.9 / 0.1.
# Correct code.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
dec = nn.Sequential(nn.Linear(16, 64), nn.Sigmoid())
gen = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2), nn.Tanh())
disc = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Sigmoid())
opt = torch.optim.Adam([*dec.parameters(), *gen.parameters(), *disc.parameters()], lr=1e-3)
for step in range(10):
    img = torch.randint(0, 256, (32, 64)).float() / 255
    loss = nn.functional.mse_loss(dec(torch.randn(32, 16)), img)
    data = torch.rand(32, 2) * 2 - 1
    loss = loss + nn.functional.huber_loss(gen(torch.randn(32, 8)), data)
    real = disc(data)
    loss = loss + nn.MSELoss()(real, torch.full_like(real, 0.9))
    fake = disc(gen(torch.randn(32, 8)).detach())
    loss = loss + nn.MSELoss()(fake, torch.full_like(fake, 0.1))
    opt.zero_grad()
    loss.backward()
    opt.step()
print(round(loss.item(), 4))
