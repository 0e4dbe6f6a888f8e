# MISTAKE: history.append(loss) at the end of each epoch keeps that epoch's
# last autograd graph alive: one more graph per epoch, memory grows all run.
# FIX: history.append(loss.item()).
# expect: graph_retained ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
history = []
for epoch in range(6):
    for i in range(5):
        x, y = torch.randn(16, 10), torch.randint(0, 3, (16,))
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    history.append(loss)
print([round(h.item(), 4) for h in history])
