# BUG: encoder output detached inside forward: encoder never learns
# expect: unused_parameter "enc"
import torch
from torch import nn
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.enc = nn.Sequential(nn.Linear(6, 16), nn.ReLU()); self.head = nn.Linear(16, 2)
    def forward(self, x):
        h = self.enc(x).detach()
        return self.head(h)
net = Net(); opt = torch.optim.Adam(net.parameters(), lr=1e-2)
for step in range(5):
    x = torch.randn(8, 6); y = torch.randint(0, 2, (8,))
    loss = nn.functional.cross_entropy(net(x), y); opt.zero_grad(); loss.backward(); opt.step()
    print(f"step {step} loss {loss.item():.6f}")
