# BUG: Adam with lr=1.0 (typed for 1e-3): the first step moves every weight by ~1, several
# times its norm; the loss jumps to hundreds and never comes back to chance level.
# expect: huge_updates ""
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.Adam(model.parameters(), lr=1.0)
crit = nn.CrossEntropyLoss()
for step in range(20):
    x, y = torch.randn(32, 20), torch.randint(0, 4, (32,))
    opt.zero_grad(); loss = crit(model(x), y); loss.backward(); opt.step()
    print(step, loss.item())
