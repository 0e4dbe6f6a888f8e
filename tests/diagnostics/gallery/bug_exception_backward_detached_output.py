# MISTAKE: the prediction is detached before the loss (meant for logging), so
# the loss has no graph: loss.backward() raises "element 0 of tensors does not
# require grad and does not have a grad_fn". FIX: compute the loss from the
# model's output itself; detach only what is logged.
# expect: exception ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
history = []
for step in range(3):
    x, y = torch.randn(8, 6), torch.randn(8, 1)
    pred = model(x).detach()
    history.append(pred.mean())
    loss = nn.functional.mse_loss(pred, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
