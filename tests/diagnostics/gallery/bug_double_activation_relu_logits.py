# BUG: an MNIST-style classifier whose nn.Sequential ends in nn.ReLU() before
# CrossEntropyLoss: negative logits are clipped to 0.
# expect: double_activation "5"
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10), nn.ReLU())
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
crit = nn.CrossEntropyLoss()
for step in range(6):
    x, y = torch.randn(32, 1, 8, 8), torch.randint(0, 10, (32,))
    opt.zero_grad()
    loss = crit(model(x), y)
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 4))
