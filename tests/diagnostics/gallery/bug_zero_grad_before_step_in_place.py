# MISTAKE: model.zero_grad(set_to_none=False) between loss.backward() and
# optimizer.step(): the gradients are zero tensors when the optimizer steps, so
# SGD with momentum and weight decay only decays the weights; nothing is learned.
# FIX: zero the gradients before the forward (or right after step()).
# expect: zero_grad_before_step ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
loss_fn = nn.CrossEntropyLoss()
for step in range(5):
    x, y = torch.randn(16, 1, 8, 8), torch.randint(0, 10, (16,))
    loss = loss_fn(model(x), y)
    loss.backward()
    model.zero_grad(set_to_none=False)
    opt.step()
