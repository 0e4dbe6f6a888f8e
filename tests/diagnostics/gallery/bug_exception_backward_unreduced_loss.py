# MISTAKE: the loss is built with reduction="none" (meant for per-sample weights)
# and backward() is called on the vector: "grad can be implicitly created only for
# scalar outputs". FIX: (loss * weights).mean().backward().
# expect: exception ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
criterion = nn.CrossEntropyLoss(reduction="none")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    opt.zero_grad()
    loss = criterion(model(x), y) * torch.rand(8)
    loss.backward()
    opt.step()
