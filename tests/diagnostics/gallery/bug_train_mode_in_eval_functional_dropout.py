# BUG: F.dropout without training=self.training: model.eval() leaves it on, evaluation is noisy
# expect: train_mode_in_eval "head"
import torch
import torch.nn.functional as F
from torch import nn
torch.manual_seed(0)
class Head(nn.Module):
    def __init__(self):
        super().__init__(); self.fc = nn.Linear(16, 3)
    def forward(self, h): return self.fc(F.dropout(h, 0.3))
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU()); self.head = Head()
    def forward(self, x): return self.head(self.body(x))
net = Net(); opt = torch.optim.Adam(net.parameters(), lr=1e-2)
x, y = torch.randn(64, 8), torch.randint(0, 3, (64,))
for step in range(6):
    loss = F.cross_entropy(net(x), y); opt.zero_grad(); loss.backward(); opt.step()
net.eval()
with torch.no_grad():
    acc = (net(x).argmax(1) == y).float().mean().item()
print(f"loss {loss.item():.4f} accuracy {acc:.3f}")
