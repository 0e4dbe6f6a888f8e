# BUG: model returns log_softmax and the loss is CrossEntropyLoss (log_softmax applied twice)
# expect: double_activation ""
import torch
from torch import nn
import torch.nn.functional as F
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__(); self.fc1 = nn.Linear(10, 20); self.fc2 = nn.Linear(20, 4)
    def forward(self, x): return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)
net = Net(); opt = torch.optim.SGD(net.parameters(), lr=0.1); crit = nn.CrossEntropyLoss()
for step in range(4):
    x = torch.randn(8, 10); y = torch.randint(0, 4, (8,))
    loss = crit(net(x), y); opt.zero_grad(); loss.backward(); opt.step(); print(f"step {step} loss {loss.item():.6f}")
