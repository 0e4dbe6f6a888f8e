# CORRECT: an L-BFGS closure that clears the gradients, then calls backward once per loss
# term (a data term and a boundary term, each from its own forward): two backwards per
# closure call add up on purpose. No grad_accumulation.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.LBFGS(net.parameters(), lr=0.5, max_iter=10)
x = torch.linspace(0, 3.14159, 32).unsqueeze(1)
y = torch.sin(x)
ends = torch.tensor([[0.0], [3.14159]])
for step in range(3):
    def closure():
        opt.zero_grad()
        data = nn.functional.mse_loss(net(x), y)
        data.backward()
        boundary = net(ends).pow(2).mean()
        boundary.backward()
        return data + boundary
    loss = opt.step(closure)
    print(f"step {step}: loss {loss.item():.6f}")
