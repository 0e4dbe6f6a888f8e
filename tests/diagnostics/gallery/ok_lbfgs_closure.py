# CORRECT: L-BFGS with a closure that zeroes the gradients itself.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=4)
x = torch.randn(64, 3)
y = x.sum(dim=1, keepdim=True)


def closure():
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    return loss


for step in range(3):
    opt.step(closure)
