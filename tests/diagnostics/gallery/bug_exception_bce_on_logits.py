# MISTAKE: nn.BCELoss on the raw output of a Linear layer (logits, not
# probabilities): it raises "all elements of input should be between 0 and 1".
# FIX: nn.BCEWithLogitsLoss on the logits.
# expect: exception ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1))
criterion = nn.BCELoss()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(2):
    x, y = torch.randn(16, 5) * 3, torch.randint(0, 2, (16, 1)).float()
    opt.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    opt.step()
