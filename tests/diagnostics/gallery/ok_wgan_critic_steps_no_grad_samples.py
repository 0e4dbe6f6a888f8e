# CORRECT: a WGAN with five critic steps per generator step; the critic's fakes are
# sampled under no_grad, so in those steps the generator (which has its own optimizer,
# not stepped then) gets no gradient; it trains in every fifth step.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
opt_g = torch.optim.RMSprop(G.parameters(), lr=5e-5)
opt_d = torch.optim.RMSprop(D.parameters(), lr=5e-5)
for it in range(3):
    for _ in range(5):
        real = torch.randn(16, 2) + 3.0
        with torch.no_grad():
            fake = G(torch.randn(16, 4))
        opt_d.zero_grad()
        (D(fake).mean() - D(real).mean()).backward()
        opt_d.step()
        for p in D.parameters():
            p.data.clamp_(-0.01, 0.01)
    opt_g.zero_grad()
    g_loss = -D(G(torch.randn(16, 4))).mean()
    g_loss.backward()
    opt_g.step()
    print(f"iteration {it} g_loss {g_loss.item():.4f}")
