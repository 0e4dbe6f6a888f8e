# MISTAKE: the training loop calls optimizer.step(), and so does the train_step helper it
# calls: each gradient is applied twice.
# expect: double_step ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def train_step(x, y):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss


for step in range(8):
    x, y = torch.randn(16, 6), torch.randn(16, 1)
    loss = train_step(x, y)
    opt.step()                       # mistake: train_step stepped already
    print(f"step {step} loss {loss.item():.4f}")
