# MISTAKE: an L-BFGS closure without optimizer.zero_grad(): L-BFGS calls the closure up to
# 20 times within each step(), and every call's backward adds into the previous call's
# gradients, so the search direction is wrong from the first step (a physics-informed
# fit of u'' = -u on [0, pi]).
# expect: grad_accumulation ""
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 1))
opt = torch.optim.LBFGS(net.parameters(), lr=0.5, max_iter=10)
x = torch.linspace(0, 3.14159, 32).unsqueeze(1)
y = torch.sin(x)
for step in range(3):
    def closure():
        loss = nn.functional.mse_loss(net(x), y)
        loss.backward()
        return loss
    loss = opt.step(closure)
    print(f"step {step}: loss {loss.item():.6f}")
