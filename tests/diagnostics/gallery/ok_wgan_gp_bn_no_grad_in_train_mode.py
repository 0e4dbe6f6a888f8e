# CORRECT: from the real-world probe: WGAN-GP, DCGAN-style generator with BatchNorm, n_critic=5, fakes for the critic drawn under no_grad
# expect: none
import torch, torch.nn as nn
torch.manual_seed(0)
G = nn.Sequential(nn.Linear(16, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 2))
D = nn.Sequential(nn.Linear(2, 128), nn.LeakyReLU(0.2), nn.Linear(128, 128), nn.LeakyReLU(0.2), nn.Linear(128, 1))
og = torch.optim.Adam(G.parameters(), 1e-4, betas=(0.5, 0.9)); od = torch.optim.Adam(D.parameters(), 1e-4, betas=(0.5, 0.9))
ring = torch.stack([torch.tensor([torch.cos(torch.tensor(k * 0.785)), torch.sin(torch.tensor(k * 0.785))]) for k in range(8)]) * 2
def real(n): return ring[torch.randint(0, 8, (n,))] + 0.05 * torch.randn(n, 2)
for it in range(30):
    for _ in range(5):
        x = real(64)
        with torch.no_grad(): fake = G(torch.randn(64, 16))
        a = torch.rand(64, 1); xh = (a * x + (1 - a) * fake).requires_grad_(True)
        g, = torch.autograd.grad(D(xh).sum(), xh, create_graph=True)
        dl = D(fake).mean() - D(x).mean() + 10 * ((g.norm(2, dim=1) - 1) ** 2).mean()
        od.zero_grad(); dl.backward(); od.step()
    gl = -D(G(torch.randn(64, 16))).mean()
    og.zero_grad(); gl.backward(); og.step()
    if it % 3 == 0: print(it, repr(dl.item()), repr(gl.item()))
