# knowledge distillation: frozen teacher in eval under no_grad, KLDiv on log_softmax vs softmax with temperature, plus CE
# expect: none
import torch
from torch import nn
import torch.nn.functional as F
torch.manual_seed(0)
teacher = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 5)).eval()
for p in teacher.parameters(): p.requires_grad_(False)
student = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 5))
opt = torch.optim.SGD(student.parameters(), lr=0.1, momentum=0.9, nesterov=True); T = 2.0
kl = nn.KLDivLoss(reduction="batchmean")
for step in range(5):
    x = torch.randn(8, 10); y = torch.randint(0, 5, (8,))
    with torch.no_grad(): t = teacher(x)
    s = student(x)
    loss = kl(F.log_softmax(s / T, dim=1), F.softmax(t / T, dim=1)) * T * T + 0.5 * F.cross_entropy(s, y, label_smoothing=0.1)
    opt.zero_grad(); loss.backward(); opt.step(); print(f"step {step} loss {loss.item():.6f}")
