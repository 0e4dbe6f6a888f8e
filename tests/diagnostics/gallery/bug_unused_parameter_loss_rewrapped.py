# MISTAKE: the loss is rebuilt from its Python value (torch.tensor(loss.item(),
# requires_grad=True)), so backward() reaches no parameter: nothing is learned.
# expect: unused_parameter ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(6):
    x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
    value = nn.functional.cross_entropy(model(x), y).item()
    loss = torch.tensor(value, requires_grad=True)
    opt.zero_grad()
    loss.backward()
    opt.step()
