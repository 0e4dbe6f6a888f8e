# MISTAKE: a copied optimizer line in a GAN: optD is built from G.parameters(), so the
# discriminator is in no optimizer and never trains (optD steps on the generator's parameters,
# which optG trains anyway). FIX: optD = torch.optim.Adam(D.parameters(), ...).
# expect: param_not_in_optimizer ""
import torch, torch.nn as nn
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
optG = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
optD = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
bce = nn.BCEWithLogitsLoss()
for it in range(30):
    real = torch.randn(64, 2) * 0.5 + 1.0; fake = G(torch.randn(64, 8))
    optD.zero_grad()
    d_loss = bce(D(real), torch.ones(64, 1)) + bce(D(fake.detach()), torch.zeros(64, 1))
    d_loss.backward(); optD.step()
    optG.zero_grad()
    g_loss = bce(D(fake), torch.ones(64, 1))
    g_loss.backward(); optG.step()
    if it % 10 == 0: print(it, round(d_loss.item(), 4), round(g_loss.item(), 4))
