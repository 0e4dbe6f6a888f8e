# MISTAKE: losses.append(loss) keeps every step's autograd graph alive.
# FIX: losses.append(loss.item()).
# expect: graph_retained ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 3))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()
losses = []
for step in range(8):
    x, y = torch.randn(16, 10), torch.randint(0, 3, (16,))
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    losses.append(loss)
print(sum(l.item() for l in losses) / len(losses))
