# MISTAKE: one layer's weights hold a NaN from the checkpoint they were loaded from,
# before any optimizer step.
# FIX: check the checkpoint (torch.isfinite(p).all()) after loading.
# expect: non_finite "2"
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 256), nn.ReLU(),
                      nn.Linear(256, 1))
state = model.state_dict()
state["2.weight"][5, 7] = float("nan")     # what the saved file held
model.load_state_dict(state)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(4):
    x, y = torch.randn(64, 8), torch.randn(64, 1)
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
