# MISTAKE: a GAN whose generator loss is computed on fake.detach(): the backward never
# reaches the generator, so its optimizer steps with no gradient and it never learns.
# expect: unused_parameter ""
import torch
from torch import nn
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2)); D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
oG, oD = torch.optim.Adam(G.parameters(), 2e-4), torch.optim.Adam(D.parameters(), 2e-4); bce = nn.BCEWithLogitsLoss()
for i in range(12):
    real = torch.randn(16, 2); z = torch.randn(16, 8); fake = G(z)
    oD.zero_grad(); lossD = bce(D(real), torch.ones(16, 1)) + bce(D(fake.detach()), torch.zeros(16, 1)); lossD.backward(); oD.step()
    oG.zero_grad(); lossG = bce(D(fake.detach()), torch.ones(16, 1)); lossG.backward(); oG.step()
    print(i, lossD.item(), lossG.item())
