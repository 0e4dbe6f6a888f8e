# MISTAKE: the discriminator steps before the generator's backward through it:
# optD.step() changes D's weights in place, and errG.backward() needs the old
# ones ("modified by an inplace operation"). FIX: compute errG after optD.step()
# with a fresh D(fake) forward, or step D after G's backward.
# expect: exception "2"
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
D = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
optG = torch.optim.Adam(G.parameters(), lr=1e-3)
optD = torch.optim.Adam(D.parameters(), lr=1e-3)
bce = nn.BCEWithLogitsLoss()
for step in range(2):
    real = torch.randn(8, 8)
    fake = G(torch.randn(8, 4))
    d_fake = D(fake)
    optD.zero_grad()
    errD = bce(D(real), torch.ones(8, 1)) + bce(d_fake, torch.zeros(8, 1))
    errD.backward(retain_graph=True)
    optD.step()
    optG.zero_grad()
    errG = bce(d_fake, torch.ones(8, 1))
    errG.backward()
    optG.step()
