# MISTAKE: a hand-written cross-entropy on F.softmax(logits, dim=0): the probabilities are
# normalised over the batch of 32 instead of over the 4 classes of each sample.
# expect: softmax_dim ""
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        return F.softmax(self.head(self.body(x)), dim=0)   # mistake: dim=1


net = Net()
opt = torch.optim.Adam(net.parameters(), 1e-2)
for step in range(6):
    x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
    probs = net(x)
    loss = -(F.one_hot(y, 4) * torch.log(probs + 1e-8)).sum(1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
