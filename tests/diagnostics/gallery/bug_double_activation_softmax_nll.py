# MISTAKE: nn.Softmax (probabilities) before nn.NLLLoss, which expects
# log-probabilities. FIX: nn.LogSoftmax(dim=1).
# expect: double_activation "3"
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4), nn.Softmax(dim=1))
criterion = nn.NLLLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x, y = torch.randn(16, 10), torch.randint(0, 4, (16,))
    opt.zero_grad()
    criterion(model(x), y).backward()
    opt.step()
