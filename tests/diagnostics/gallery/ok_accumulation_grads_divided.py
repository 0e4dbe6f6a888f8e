# CORRECT: gradient accumulation that divides the accumulated gradients (not the loss) by the
# number of micro-batches before clipping and stepping.
# expect: none
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
ACCUM = 4
w = torch.randn(12, 1)
for step in range(8):
    opt.zero_grad()
    for micro in range(ACCUM):
        x = torch.randn(16, 12); y = x @ w
        loss = F.mse_loss(model(x), y)
        loss.backward()
    for p in model.parameters():
        p.grad.div_(ACCUM)          # average the micro-batch gradients
    torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    opt.step()
    print(step, repr(loss.item()))
print('final', repr(sum(p.double().sum().item() for p in model.parameters())))
