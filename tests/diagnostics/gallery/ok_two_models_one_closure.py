# CORRECT: two regressors trained side by side: the first with zero_grad/backward/step, the second
# with Adam.step(closure), whose closure zeroes, forwards and backwards.
# expect: none
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
m1 = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
m2 = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))
opt1 = torch.optim.Adam(m1.parameters(), lr=3e-3)
opt2 = torch.optim.Adam(m2.parameters(), lr=3e-3)
w = torch.randn(8, 1)
for step in range(10):
    x = torch.randn(32, 8); y = x @ w
    l1 = F.mse_loss(m1(x), y); opt1.zero_grad(); l1.backward(); opt1.step()
    def closure():
        opt2.zero_grad(); l = F.mse_loss(m2(x), y); l.backward(); return l
    l2 = opt2.step(closure)
    print(step, repr(l1.item()), repr(l2.item()))
print('final', repr(sum(p.double().sum().item() for p in [*m1.parameters(), *m2.parameters()])))
