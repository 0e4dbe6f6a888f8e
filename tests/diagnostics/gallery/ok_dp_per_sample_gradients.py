# DP-SGD by hand: one backward per sample (each zeroed after its gradient is clipped and
# added up), then the noised mean is set as p.grad and the optimizer steps. The
# zero_grad() between the backwards is the method, not accumulation gone wrong.
# Correct code.
# expect: none
import torch, torch.nn as nn
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2)); opt = torch.optim.SGD(m.parameters(), 0.05)
for it in range(6):
    x, y = torch.randn(8, 8), torch.randint(0, 2, (8,))
    acc = [torch.zeros_like(p) for p in m.parameters()]
    for i in range(8):
        opt.zero_grad()
        nn.functional.cross_entropy(m(x[i:i+1]), y[i:i+1]).backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        for a, p in zip(acc, m.parameters()): a += p.grad
    for a, p in zip(acc, m.parameters()): p.grad = (a + 0.1 * torch.randn_like(a)) / 8
    opt.step()
