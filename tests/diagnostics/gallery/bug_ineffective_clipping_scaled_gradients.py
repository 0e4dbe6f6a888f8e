# MISTAKE: mixed precision with a GradScaler, gradients clipped before
# scaler.unscale_(opt): the clip sees the gradients times the loss scale (65536),
# clips every step, and the unscaled update is at most 1/65536: nothing learns.
# FIX: scaler.unscale_(opt) right before clip_grad_norm_.
# expect: ineffective_clipping ""
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
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # on scaled gradients
    scaler.step(opt)
    scaler.update()
print(round(loss.item(), 4), scaler.get_scale())
