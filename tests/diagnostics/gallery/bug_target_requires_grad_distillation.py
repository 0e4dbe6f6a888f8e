# BUG: knowledge distillation whose teacher runs with gradients on (no no_grad,
# parameters not frozen): every backward also differentiates the KL term through the
# soft targets into the teacher.
# expect: target_requires_grad ""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
teacher = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 5)).eval()
student = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 5))
opt = torch.optim.Adam(student.parameters(), lr=1e-3)
T = 4.0
for step in range(5):
    x, y = torch.randn(8, 10), torch.randint(0, 5, (8,))
    soft = F.softmax(teacher(x) / T, dim=1)
    s = student(x)
    kd = F.kl_div(F.log_softmax(s / T, dim=1), soft, reduction="batchmean") * T * T
    loss = 0.7 * kd + 0.3 * F.cross_entropy(s, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
