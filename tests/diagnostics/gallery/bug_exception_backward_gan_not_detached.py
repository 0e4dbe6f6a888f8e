# MISTAKE: the discriminator's step backpropagates through netD(fake) without
# fake.detach(), which frees the generator's graph; the generator's backward then
# needs it again ("Trying to backward through the graph a second time").
# FIX: netD(fake.detach()) in the discriminator's step.
# expect: exception "0"
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
D = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
optG = torch.optim.Adam(G.parameters(), lr=1e-3)
optD = torch.optim.Adam(D.parameters(), lr=1e-3)
bce = nn.BCEWithLogitsLoss()
for step in range(2):
    real, fake = torch.randn(8, 8), G(torch.randn(8, 4))
    optD.zero_grad()
    errD = bce(D(real), torch.ones(8, 1)) + bce(D(fake), torch.zeros(8, 1))
    errD.backward()
    optD.step()
    optG.zero_grad()
    errG = bce(D(fake), torch.ones(8, 1))
    errG.backward()
    optG.step()
