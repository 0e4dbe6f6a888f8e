# Zero starts that are correct: a classifier head initialised to zero, a
# LoRA-style adapter whose B starts at zero (its A is random), a zero-init last
# layer of a residual branch, a frozen averaging layer of constant weights, and
# a scalar value head of one unit at zero. Each of the trainable ones moves
# apart at the first step (every output has its own error).
# Correct code.
# expect: none
import torch
from torch import nn


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, r: int = 4) -> None:
        super().__init__()
        self.base = base.requires_grad_(False)
        self.A = nn.Linear(base.in_features, r, bias=False)
        self.B = nn.Linear(r, base.out_features, bias=False)
        nn.init.zeros_(self.B.weight)

    def forward(self, x):
        return self.base(x) + self.B(self.A(x))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = LoRALinear(nn.Linear(16, 32))
        self.branch = nn.Sequential(nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 32))
        nn.init.zeros_(self.branch[2].weight)
        nn.init.zeros_(self.branch[2].bias)
        self.pool = nn.Linear(32, 32, bias=False).requires_grad_(False)
        nn.init.constant_(self.pool.weight, 1 / 32)
        self.head = nn.Linear(32, 5)
        nn.init.zeros_(self.head.weight)
        self.value = nn.Linear(32, 1)
        nn.init.zeros_(self.value.weight)

    def forward(self, x):
        h = torch.relu(self.inp(x))
        h = h + self.branch(h)
        h = h + self.pool(h)
        return self.head(h), self.value(h).squeeze(1)


torch.manual_seed(0)
net = Net()
opt = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=1e-3)
for step in range(12):
    x, y, v = torch.randn(32, 16), torch.randint(0, 5, (32,)), torch.randn(32)
    logits, value = net(x)
    loss = nn.functional.cross_entropy(logits, y) + nn.functional.mse_loss(value, v)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(round(loss.item(), 4))
