# BUG: a learnable temperature kept as a plain tensor attribute (not nn.Parameter): it is
# not in model.parameters(), so the optimizer never updates it although it gets gradients.
# expect: param_not_in_optimizer ""
import torch
from torch import nn

torch.manual_seed(0)
class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(10, 4)
        self.log_temp = torch.zeros(1, requires_grad=True)
    def forward(self, x):
        return self.fc(x) / self.log_temp.exp()
model = Scaled()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
crit = nn.CrossEntropyLoss()
for step in range(6):
    x, y = torch.randn(16, 10), torch.randint(0, 4, (16,))
    opt.zero_grad()
    loss = crit(model(x), y)
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 4), model.log_temp.item())
