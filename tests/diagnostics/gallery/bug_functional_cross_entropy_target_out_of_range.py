# MISTAKE: 1-based labels (1..3) for 3 classes given to F.cross_entropy: PyTorch raises
# "Target 3 is out of bounds". The finding names the loss, its inputs and the fix.
# FIX: labels 0..2 (y - 1), or a last layer with 4 outputs.
# expect: exception ""
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    x, y = torch.randn(16, 4), torch.randint(1, 4, (16,))
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
