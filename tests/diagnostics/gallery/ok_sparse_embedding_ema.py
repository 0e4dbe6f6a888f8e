# sparse embedding with SparseAdam + dense Adam, an EMA copy of the model evaluated in eval/no_grad
# expect: none
import copy, torch
from torch import nn
torch.manual_seed(0)
class Rec(nn.Module):
    def __init__(self):
        super().__init__(); self.users = nn.Embedding(50, 8, sparse=True); self.items = nn.Embedding(40, 8, sparse=True); self.mlp = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Dropout(0.1), nn.Linear(8, 1))
    def forward(self, u, i): return self.mlp(torch.cat([self.users(u), self.items(i)], -1)).squeeze(-1)
m = Rec(); ema = copy.deepcopy(m).eval()
for p in ema.parameters(): p.requires_grad_(False)
o1 = torch.optim.SparseAdam(list(m.users.parameters()) + list(m.items.parameters()), lr=1e-2); o2 = torch.optim.Adam(m.mlp.parameters(), lr=1e-2)
for step in range(5):
    u = torch.randint(0, 50, (16,)); i = torch.randint(0, 40, (16,)); r = torch.rand(16) * 5
    loss = nn.functional.mse_loss(m(u, i), r); o1.zero_grad(); o2.zero_grad(); loss.backward(); o1.step(); o2.step()
    with torch.no_grad():
        for pe, pm in zip(ema.parameters(), m.parameters()): pe.mul_(0.9).add_(pm.detach(), alpha=0.1)
        ev = nn.functional.mse_loss(ema(u, i), r)
    print(f"step {step} loss {loss.item():.6f} ema {ev.item():.6f}")
