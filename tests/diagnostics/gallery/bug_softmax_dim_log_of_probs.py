# BUG: class probabilities computed with F.softmax(scores, dim=0) (over the batch), then
# torch.log(p + 1e-8) into NLLLoss.
# expect: softmax_dim ""
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 32)
        self.fc2 = nn.Linear(32, 4)
    def forward(self, x):
        return F.softmax(self.fc2(torch.relu(self.fc1(x))), dim=0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
crit = nn.NLLLoss()
for step in range(5):
    x, y = torch.randn(16, 12), torch.randint(0, 4, (16,))
    opt.zero_grad()
    loss = crit(torch.log(model(x) + 1e-8), y)
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 4))
