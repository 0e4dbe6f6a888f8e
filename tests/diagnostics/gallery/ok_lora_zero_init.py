# CORRECT: LoRA adapters on a frozen layer: B starts at zero (the adapter adds nothing at
# first), so the first step rewrites B entirely, as it should, at a sane Adam rate.
# expect: none
import math

import torch
from torch import nn

torch.manual_seed(0)


class LoRALinear(nn.Module):
    def __init__(self, d_in: int, d_out: int, r: int = 4) -> None:
        super().__init__()
        self.base = nn.Linear(d_in, d_out)
        self.base.requires_grad_(False)
        self.A = nn.Parameter(torch.empty(r, d_in))
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
        self.B = nn.Parameter(torch.zeros(d_out, r))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + x @ self.A.t() @ self.B.t()


model = nn.Sequential(LoRALinear(32, 32), nn.ReLU(), LoRALinear(32, 32), nn.ReLU(), nn.Linear(32, 5))
model[4].requires_grad_(False)
opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
for step in range(12):
    x, y = torch.randn(16, 32), torch.randint(0, 5, (16,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
