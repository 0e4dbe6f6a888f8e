# BUG: the optimizer is built on a first model; the model is then re-created (e.g. after loading config) and trained
# expect: param_not_in_optimizer ""
import torch
from torch import nn
torch.manual_seed(0)
def make(): return nn.Sequential(nn.Linear(5, 10), nn.ReLU(), nn.Linear(10, 2))
model = make(); optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
model = make()
for step in range(4):
    x = torch.randn(8, 5); y = torch.randint(0, 2, (8,))
    loss = nn.functional.cross_entropy(model(x), y); optimizer.zero_grad(); loss.backward(); optimizer.step()
    print(f"step {step} loss {loss.item():.6f}")
