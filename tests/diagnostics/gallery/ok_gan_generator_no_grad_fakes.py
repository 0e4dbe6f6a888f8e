# A GAN whose generator (with BatchNorm, in train mode) draws the discriminator's fakes
# under torch.no_grad() each iteration, from the very first one (before any optimizer
# has stepped), then is trained on its own forward with gradients. The no_grad forward
# is training data for the other network, not an evaluation. Correct code.
# expect: none
import torch, torch.nn as nn
from torch.nn.utils import spectral_norm as SN
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 2))
D = nn.Sequential(SN(nn.Linear(2, 32)), nn.LeakyReLU(0.1), SN(nn.Linear(32, 1)))
oG = torch.optim.Adam(G.parameters(), 1e-4, betas=(0.0, 0.9)); oD = torch.optim.Adam(D.parameters(), 4e-4, betas=(0.0, 0.9))
for it in range(6):
    real = torch.randn(32, 2) + 2
    with torch.no_grad(): fake = G(torch.randn(32, 8))
    lD = torch.relu(1 - D(real)).mean() + torch.relu(1 + D(fake)).mean(); oD.zero_grad(); lD.backward(); oD.step()
    lG = -D(G(torch.randn(32, 8))).mean(); oG.zero_grad(); lG.backward(); oG.step()
G.eval()
with torch.no_grad(): print(G(torch.randn(4, 8)))
