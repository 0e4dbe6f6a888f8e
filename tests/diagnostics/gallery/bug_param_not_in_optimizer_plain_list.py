# MISTAKE: the hidden layers are kept in a plain Python list, so they are not
# registered: model.parameters() (and the optimizer) never see them and they
# never train. FIX: nn.ModuleList.
# expect: param_not_in_optimizer "hidden"
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(8, 16)
        self.hidden = [nn.Linear(16, 16) for _ in range(2)]
        self.out = nn.Linear(16, 2)

    def forward(self, x):
        x = torch.relu(self.inp(x))
        for layer in self.hidden:
            x = torch.relu(layer(x))
        return self.out(x)


torch.manual_seed(0)
model = MLP()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(4):
    x, y = torch.randn(8, 8), torch.randint(0, 2, (8,))
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
