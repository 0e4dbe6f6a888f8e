# CORRECT: AdaBN / BN recalibration: after training, re-estimate BatchNorm running statistics on target-domain data by
# forward passes in train mode under no_grad (stats reset first, default momentum), then evaluate in eval mode.
# expect: none
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(8):
    model.train()
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    loss = F.cross_entropy(model(x), y); opt.zero_grad(); loss.backward(); opt.step()
    print('train', step, repr(loss.item()))
target = torch.randn(128, 8) * 2 + 1
bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm1d)]
for bn in bns: bn.reset_running_stats()
model.train()
with torch.no_grad():
    for xb in target.split(32):
        model(xb)
model.eval()
with torch.no_grad():
    out = model(target[:16])
print('eval', repr(out.sum().item()), repr(bns[0].running_mean.sum().item()))
