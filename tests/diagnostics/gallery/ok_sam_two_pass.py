# CORRECT: Sharpness-Aware Minimization (the common SAM optimizer wrapper): the first
# backward finds the ascent direction, first_step perturbs the weights and zeroes the
# gradients, the second backward on the same batch gives the gradient that the base
# optimizer steps with.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        super().__init__(params, dict(rho=rho, **kwargs))
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        norm = torch.norm(torch.stack([p.grad.norm(2) for g in self.param_groups
                                       for p in g["params"] if p.grad is not None]), 2)
        for group in self.param_groups:
            scale = group["rho"] / (norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                e_w = p.grad * scale
                p.add_(e_w)
                self.state[p]["e_w"] = e_w
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if "e_w" in self.state[p]:
                    p.sub_(self.state[p]["e_w"])
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()


model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4))
opt = SAM(model.parameters(), torch.optim.SGD, lr=0.1, momentum=0.9)
crit = nn.CrossEntropyLoss()
for step in range(8):
    x, y = torch.randn(16, 10), torch.randint(0, 4, (16,))
    crit(model(x), y).backward()
    opt.first_step(zero_grad=True)
    loss = crit(model(x), y)
    loss.backward()
    opt.second_step(zero_grad=True)
    print(f"step {step} loss {loss.item():.4f}")
