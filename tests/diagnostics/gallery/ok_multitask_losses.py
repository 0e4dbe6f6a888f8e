# CORRECT: two heads, two loss modules, one backward on the weighted sum; an
# input-gradient (saliency) computation that uses its graph; MSELoss with
# matching [N, 1] shapes.
# expect: none
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
        self.cls = nn.Linear(32, 3)
        self.reg = nn.Linear(32, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.cls(h), self.reg(h)


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
ce, mse = nn.CrossEntropyLoss(), nn.MSELoss()
for step in range(5):
    x, c, r = torch.randn(16, 10), torch.randint(0, 3, (16,)), torch.randn(16, 1)
    opt.zero_grad()
    logits, value = model(x)
    loss = ce(logits, c) + 0.5 * mse(value, r)
    loss.backward()
    opt.step()
x = torch.randn(1, 10, requires_grad=True)
logits, _ = model(x)
saliency, = torch.autograd.grad(logits[0, 0], x)
print(saliency.abs().sum().item())
