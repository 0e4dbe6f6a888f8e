# CORRECT: CosineAnnealingLR over the run's batches, stepped every batch: the rate reaches 0 at
# the last batch, as meant.
# expect: none
import torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
total = 40
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total)
X, Y = torch.randn(640, 10), torch.randint(0, 3, (640,))
for step in range(total):
    i = (step * 64) % 640
    opt.zero_grad(); loss = nn.functional.cross_entropy(model(X[i:i + 64]), Y[i:i + 64]); loss.backward(); opt.step()
    sched.step()
print(loss.item())
