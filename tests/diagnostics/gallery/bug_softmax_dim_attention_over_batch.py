# MISTAKE: hand-written self-attention whose weights are normalised over dimension 0 of
# the [B, T, T] scores (the batch) instead of the keys (dim=-1).
# expect: softmax_dim "attn"
import torch
from torch import nn
import torch.nn.functional as F
torch.manual_seed(0)
class Attn(nn.Module):
    def __init__(self, d):
        super().__init__(); self.q = nn.Linear(d, d); self.k = nn.Linear(d, d); self.v = nn.Linear(d, d)
    def forward(self, x):
        s = self.q(x) @ self.k(x).transpose(1, 2) / 4.0
        return F.softmax(s, dim=0) @ self.v(x)
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.emb = nn.Embedding(20, 16); self.attn = Attn(16); self.out = nn.Linear(16, 20)
    def forward(self, t): return self.out(self.attn(self.emb(t)))
net = Net(); opt = torch.optim.Adam(net.parameters(), 1e-2)
for step in range(6):
    t = torch.randint(0, 20, (8, 10))
    loss = F.cross_entropy(net(t).reshape(-1, 20), t.reshape(-1))
    opt.zero_grad(); loss.backward(); opt.step(); print(loss.item())
