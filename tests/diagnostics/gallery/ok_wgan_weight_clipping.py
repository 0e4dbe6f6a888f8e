# The original WGAN: RMSprop, the critic trained n_critic=3 times per generator
# step on fake.detach(), its weights clipped in place after each of its steps
# (p.data.clamp_), the generator's loss through the critic with the critic's
# gradients zeroed before its own next step. Correct code.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 8))
C = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
opt_g = torch.optim.RMSprop(G.parameters(), lr=5e-5)
opt_c = torch.optim.RMSprop(C.parameters(), lr=5e-5)
for it in range(3):
    for _ in range(3):
        real = torch.randn(16, 8) + 2
        fake = G(torch.randn(16, 4)).detach()
        opt_c.zero_grad()
        loss_c = C(fake).mean() - C(real).mean()
        loss_c.backward()
        opt_c.step()
        for p in C.parameters():
            p.data.clamp_(-0.01, 0.01)
    opt_g.zero_grad()
    loss_g = -C(G(torch.randn(16, 4))).mean()
    loss_g.backward()
    opt_g.step()
