# BUG: NLLLoss fed raw logits (no log_softmax): the loss goes negative without bound.
# expect: double_activation "fc2"
import torch
from torch import nn

torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32)
        self.fc2 = nn.Linear(32, 5)
    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
crit = nn.NLLLoss()
for step in range(8):
    x, y = torch.randn(16, 20), torch.randint(0, 5, (16,))
    opt.zero_grad()
    loss = crit(model(x), y)
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 4))
