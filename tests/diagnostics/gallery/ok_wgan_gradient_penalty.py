# WGAN-GP: gradient penalty with autograd.grad(create_graph=True), critic trained 3x per G step
# expect: none
import torch
from torch import nn
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
C = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
oG = torch.optim.Adam(G.parameters(), lr=1e-4, betas=(0.0, 0.9)); oC = torch.optim.Adam(C.parameters(), lr=1e-4, betas=(0.0, 0.9))
for it in range(3):
    for _ in range(3):
        real = torch.randn(16, 2) + 2; fake = G(torch.randn(16, 4)).detach()
        a = torch.rand(16, 1); xh = (a * real + (1 - a) * fake).requires_grad_(True)
        g = torch.autograd.grad(C(xh).sum(), xh, create_graph=True)[0]
        gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
        lc = C(fake).mean() - C(real).mean() + 10 * gp
        oC.zero_grad(); lc.backward(); oC.step()
    lg = -C(G(torch.randn(16, 4))).mean(); oG.zero_grad(); lg.backward(); oG.step()
    print(f"it {it} critic {lc.item():.6f} gen {lg.item():.6f} gp {gp.item():.6f}")
