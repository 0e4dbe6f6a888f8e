# zero_grad(set_to_none=False) after each step (the gradients stay as zero
# tensors between steps), a GAN whose generator's gradients are zero tensors
# during the discriminator's step, and gradient clipping at a real threshold.
# Correct code.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
for step in range(25):
    x, y = torch.randn(16, 10), torch.randn(16, 1)
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    opt.step()
    opt.zero_grad(set_to_none=False)
print(round(loss.item(), 5))

G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
og = torch.optim.Adam(G.parameters(), lr=1e-3)
od = torch.optim.Adam(D.parameters(), lr=1e-3)
bce = nn.BCEWithLogitsLoss()
for step in range(25):
    real, z = torch.randn(32, 2) + 2, torch.randn(32, 4)
    fake = G(z)
    od.zero_grad(set_to_none=False)
    d_loss = bce(D(real), torch.ones(32, 1)) + bce(D(fake.detach()), torch.zeros(32, 1))
    d_loss.backward()
    od.step()
    og.zero_grad(set_to_none=False)
    g_loss = bce(D(fake), torch.ones(32, 1))
    g_loss.backward()
    og.step()
print(round(d_loss.item(), 4), round(g_loss.item(), 4))
