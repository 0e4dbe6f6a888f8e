# CORRECT: distillation with a teacher run under inference_mode (its requires_grad flags
# left on) and left out of the optimizer; an evaluation of the student under no_grad
# follows each step.
# expect: none
import copy

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
teacher = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 5))
student = copy.deepcopy(teacher[:1]).append(nn.ReLU()).append(nn.Linear(32, 5))
opt = torch.optim.Adam(student.parameters(), lr=1e-3)
for step in range(8):
    x = torch.randn(8, 10)
    with torch.inference_mode():
        t = teacher(x)
    loss = F.kl_div(F.log_softmax(student(x), 1), F.softmax(t.clone(), 1), reduction="batchmean")
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        val = F.mse_loss(student(torch.randn(8, 10)), teacher(torch.randn(8, 10))).item()
    print(f"step {step} loss {loss.item():.4f} val {val:.4f}")
