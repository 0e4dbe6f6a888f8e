# CORRECT: from the real-world probe: MixMatch: label guessing averaged over K=2 weak augmentations under no_grad (model in train mode), sharpening, mixup
# expect: none
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(20, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.Adam(m.parameters(), 2e-3)
C = torch.randn(4, 20) * 1.5
def data(n): y = torch.randint(0, 4, (n,)); return C[y] + torch.randn(n, 20), y
def aug(x): return x + 0.2 * torch.randn_like(x)
beta = torch.distributions.Beta(0.75, 0.75)
for step in range(40):
    xl, yl = data(32); xu, _ = data(32)
    u1, u2 = aug(xu), aug(xu)
    with torch.no_grad():
        p = (F.softmax(m(u1), 1) + F.softmax(m(u2), 1)) / 2
        p = p ** 2; p = p / p.sum(1, keepdim=True)       # sharpen, T=0.5
    xa = torch.cat([aug(xl), u1, u2]); ya = torch.cat([F.one_hot(yl, 4).float(), p, p])
    lam = beta.sample(); lam = torch.max(lam, 1 - lam); perm = torch.randperm(xa.size(0))
    xm = lam * xa + (1 - lam) * xa[perm]; ym = lam * ya + (1 - lam) * ya[perm]
    out = m(xm)
    lx = -(F.log_softmax(out[:32], 1) * ym[:32]).sum(1).mean()
    lu = F.mse_loss(F.softmax(out[32:], 1), ym[32:])
    loss = lx + 75 * min(step / 40, 1.0) * lu
    opt.zero_grad(); loss.backward(); opt.step()
    if step % 4 == 0: print(step, repr(lx.item()), repr(lu.item()))
m.eval()
with torch.no_grad(): x, y = data(500); print("acc", repr((m(x).argmax(1) == y).float().mean().item()))
