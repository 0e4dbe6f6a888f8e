# MISTAKE: gradient accumulation (4 micro-batches) of a multi-task loss `ce + 0.5 * mse`, not divided by 4
# FIX: ((ce + 0.5 * mse) / 4).backward().
# expect: unscaled_accumulation ""
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
class TwoHead(nn.Module):
    def __init__(self):
        super().__init__(); self.body = nn.Sequential(nn.Linear(20, 64), nn.ReLU()); self.cls = nn.Linear(64, 5); self.reg = nn.Linear(64, 1)
    def forward(self, x):
        h = self.body(x); return self.cls(h), self.reg(h).squeeze(-1)
model = TwoHead(); opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
X, Yc, Yr = torch.randn(1024, 20), torch.randint(0, 5, (1024,)), torch.randn(1024)
accum = 4
for step, i in enumerate(range(0, 1024, 16)):
    logits, r = model(X[i:i+16])
    loss = F.cross_entropy(logits, Yc[i:i+16]) + 0.5 * F.mse_loss(r, Yr[i:i+16])
    loss.backward()
    if (step + 1) % accum == 0:
        opt.step(); opt.zero_grad()
    if step % 16 == 0: print(step, f"{loss.item():.6f}")
