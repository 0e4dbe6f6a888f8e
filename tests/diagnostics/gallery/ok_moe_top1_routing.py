# CORRECT: a mixture-of-experts layer with top-1 routing over 8 experts and 6 tokens a
# batch: experts that no token reached get no gradient (conditional computation, not an
# unused layer; at most an info finding).
# expect: none
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
class MoE(nn.Module):
    def __init__(self, d=16, n=8):
        super().__init__()
        self.gate = nn.Linear(d, n); self.experts = nn.ModuleList(nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, d)) for _ in range(n))
    def forward(self, x):
        w = F.softmax(self.gate(x), dim=-1); top, idx = w.max(-1); out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            m = idx == e
            if m.any(): out[m] = expert(x[m]) * top[m].unsqueeze(-1)
        return out
model = nn.Sequential(nn.Linear(10, 16), MoE(), nn.Linear(16, 3)); opt = torch.optim.AdamW(model.parameters(), 1e-3)
for step in range(30):
    x, y = torch.randn(6, 10), torch.randint(0, 3, (6,))
    loss = F.cross_entropy(model(x), y); opt.zero_grad(); loss.backward(); opt.step()
    if step % 10 == 0: print(step, loss.item())
