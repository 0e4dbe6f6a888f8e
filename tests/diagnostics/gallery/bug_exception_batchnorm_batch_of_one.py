# BUG: BatchNorm1d in train mode fed a batch of one (last incomplete batch): PyTorch raises
# expect: exception "bn"
import torch
from torch import nn
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.fc = nn.Linear(4, 8); self.bn = nn.BatchNorm1d(8); self.out = nn.Linear(8, 1)
    def forward(self, x): return self.out(torch.relu(self.bn(self.fc(x))))
net = Net(); opt = torch.optim.SGD(net.parameters(), lr=0.1); data = torch.randn(9, 4)
for i in range(0, 9, 4):
    x = data[i:i+4]; loss = net(x).pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step(); print(f"batch {i} loss {loss.item():.6f}")
