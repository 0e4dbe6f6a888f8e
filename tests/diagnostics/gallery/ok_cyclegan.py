# CORRECT: cyclegan in the usual style (tiny sizes, random data).
# expect: none
import itertools, torch, torch.nn as nn
torch.manual_seed(0)
def G(): return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.InstanceNorm2d(8), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1), nn.Tanh())
def D(): return nn.Sequential(nn.Conv2d(3, 8, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 4, 1, 1))
G_AB, G_BA, D_A, D_B = G(), G(), D(), D()
opt_G = torch.optim.Adam(itertools.chain(G_AB.parameters(), G_BA.parameters()), lr=2e-4, betas=(0.5, 0.999))
opt_D = torch.optim.Adam(itertools.chain(D_A.parameters(), D_B.parameters()), lr=2e-4, betas=(0.5, 0.999))
mse, l1 = nn.MSELoss(), nn.L1Loss()
def set_requires_grad(nets, flag):
    for n in nets:
        for p in n.parameters(): p.requires_grad = flag
for step in range(4):
    real_A, real_B = torch.rand(1, 3, 16, 16), torch.rand(1, 3, 16, 16)
    fake_B, fake_A = G_AB(real_A), G_BA(real_B)
    rec_A, rec_B = G_BA(fake_B), G_AB(fake_A)
    set_requires_grad([D_A, D_B], False)
    opt_G.zero_grad()
    pa, pb = D_A(fake_A), D_B(fake_B)
    loss_G = mse(pa, torch.ones_like(pa)) + mse(pb, torch.ones_like(pb)) + 10 * (l1(rec_A, real_A) + l1(rec_B, real_B)) + 5 * (l1(G_BA(real_A), real_A) + l1(G_AB(real_B), real_B))
    loss_G.backward(); opt_G.step()
    set_requires_grad([D_A, D_B], True)
    opt_D.zero_grad()
    def d_loss(D, real, fake):
        pr, pf = D(real), D(fake.detach())
        return 0.5 * (mse(pr, torch.ones_like(pr)) + mse(pf, torch.zeros_like(pf)))
    loss_D = d_loss(D_A, real_A, fake_A) + d_loss(D_B, real_B, fake_B); loss_D.backward(); opt_D.step()
    print(step, loss_G.item(), loss_D.item())
