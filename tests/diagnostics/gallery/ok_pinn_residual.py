# CORRECT: a physics-informed fit of u'' = -u: the collocation points require grad so
# that autograd can differentiate the network; the residual's target -u depends on the
# network on purpose (both sides of the equation are the model's).
# expect: none
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
u = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.Adam(u.parameters(), lr=1e-3)
for step in range(5):
    x = torch.rand(64, 1, requires_grad=True) * 3
    y = u(x)
    du = torch.autograd.grad(y.sum(), x, create_graph=True)[0]
    d2u = torch.autograd.grad(du.sum(), x, create_graph=True)[0]
    boundary = u(torch.zeros(1, 1))
    loss = F.mse_loss(d2u, -y) + F.mse_loss(boundary, torch.zeros(1, 1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
