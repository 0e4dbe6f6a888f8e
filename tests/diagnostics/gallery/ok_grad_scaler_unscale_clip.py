# Mixed precision with a GradScaler done right: unscale_, then clip, then
# scaler.step and update; the same loop with the scaler disabled.
# Correct code.
# expect: none
import torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
scaler = torch.amp.GradScaler("cpu")
for step in range(12):
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.unscale_(opt)
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(opt)
    scaler.update()
print(round(loss.item(), 4), scaler.get_scale())

off = torch.amp.GradScaler("cpu", enabled=False)
for step in range(6):
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    off.scale(loss).backward()
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    off.step(opt)
    off.update()
print(round(loss.item(), 4))
