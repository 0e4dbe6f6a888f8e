# MISTAKE: the whole model cast to .half() and trained with plain SGD: float16 weights cannot hold the
# small updates, which round away. FIX: float32 weights with torch.autocast and a GradScaler.
# expect: tiny_updates ""
import torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)).half()
opt = torch.optim.SGD(model.parameters(), lr=1e-4)
X = torch.randn(512, 32); Y = X[:, :1] * 0.5
for step in range(40):
    i = (step * 64) % 512
    xb = X[i:i+64].half(); yb = Y[i:i+64].half()
    loss = nn.functional.mse_loss(model(xb), yb)
    opt.zero_grad(); loss.backward(); opt.step()
    if step % 10 == 0: print(step, round(loss.item(), 6), round(model[0].weight.float().sum().item(), 6))
