# BUG: knowledge distillation whose KL term is given the student's softmax probabilities as
# its input: KLDivLoss expects log-probabilities there, so the loss is wrong (it can go
# negative) and does not match the student to the teacher.
# FIX: kd(F.log_softmax(s / T, dim=1), t).
# expect: double_activation ""
import torch
from torch import nn
import torch.nn.functional as F
torch.manual_seed(0)
teacher = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 5)).eval()
student = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 5))
opt = torch.optim.Adam(student.parameters(), 1e-3); T = 2.0
kd = nn.KLDivLoss(reduction="batchmean")
for step in range(6):
    x, y = torch.randn(32, 10), torch.randint(0, 5, (32,))
    with torch.no_grad():
        t = F.softmax(teacher(x) / T, dim=1)
    s = student(x)
    loss = kd(F.softmax(s / T, dim=1), t) * T * T + F.cross_entropy(s, y)
    opt.zero_grad(); loss.backward(); opt.step()
