# MISTAKE: a NaN slipped into the training data (e.g. a missing value in a CSV).
# FIX: clean the data (torch.nan_to_num, drop the rows) before it reaches the model.
# expect: non_finite ""
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.MSELoss()
for step in range(4):
    x = torch.randn(16, 8)
    if step == 2:
        x[3, 5] = float("nan")
    y = torch.randn(16, 1)
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
