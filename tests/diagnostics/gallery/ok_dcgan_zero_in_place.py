# CORRECT: pytorch/examples DCGAN order with the gradients zeroed in place:
# D.zero_grad(set_to_none=False), real + fake(detached) backward, optimizerD.step();
# G.zero_grad(set_to_none=False), backward through D, optimizerG.step().
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.ConvTranspose2d(8, 16, 4, 1, 0, bias=False), nn.BatchNorm2d(16), nn.ReLU(True),
                  nn.ConvTranspose2d(16, 1, 4, 2, 1, bias=False), nn.Tanh())
D = nn.Sequential(nn.Conv2d(1, 16, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
                  nn.Conv2d(16, 1, 4, 1, 0, bias=False), nn.Sigmoid())
crit = nn.BCELoss()
optD = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
optG = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
fixed = torch.randn(4, 8, 1, 1)
for i in range(6):
    real = torch.rand(8, 1, 8, 8) * 2 - 1
    D.zero_grad(set_to_none=False)
    out = D(real).view(-1)
    errD_real = crit(out, torch.ones(8))
    errD_real.backward()
    fake = G(torch.randn(8, 8, 1, 1))
    out = D(fake.detach()).view(-1)
    errD_fake = crit(out, torch.zeros(8))
    errD_fake.backward()
    optD.step()
    G.zero_grad(set_to_none=False)
    out = D(fake).view(-1)
    errG = crit(out, torch.ones(8))
    errG.backward()
    optG.step()
    print(i, round((errD_real + errD_fake).item(), 4), round(errG.item(), 4))
    if i % 3 == 0:
        with torch.no_grad():
            print(G(fixed).shape)
