# CORRECT: the backbone is frozen by giving its parameter group lr=0 (and no weight
# decay); the head trains. Most parameters do not move, on purpose.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
backbone = nn.Sequential(nn.Linear(16, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU())
head = nn.Linear(256, 4)
model = nn.Sequential(backbone, head)
opt = torch.optim.SGD([{"params": backbone.parameters(), "lr": 0.0},
                       {"params": head.parameters(), "lr": 0.05}], momentum=0.9)
for step in range(31):
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
