# CORRECT: LogSoftmax followed by NLLLoss (equivalent to CrossEntropyLoss on logits).
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4), nn.LogSoftmax(dim=1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.NLLLoss()
for step in range(4):
    x, y = torch.randn(16, 10), torch.randint(0, 4, (16,))
    opt.zero_grad()
    loss_fn(model(x), y).backward()
    opt.step()
