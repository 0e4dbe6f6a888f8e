# CORRECT: hand-written losses on matching shapes: MSE on [N, 1] vs y.unsqueeze(1),
# pairwise distances to learned prototypes (a broadcast on purpose), Huber by hand.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(5, 16), nn.ReLU())
        self.out = nn.Linear(16, 1)
        self.emb = nn.Linear(16, 4)
        self.protos = nn.Parameter(torch.randn(3, 4))
    def forward(self, x):
        h = self.body(x)
        return self.out(h), self.emb(h)
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
fixed_centers = torch.randn(3, 4)
for step in range(6):
    x = torch.randn(32, 5)
    y = x.sum(1)
    c = torch.randint(0, 3, (32,))
    pred, emb = model(x)
    mse = ((pred - y.unsqueeze(1)) ** 2).mean()
    d = ((emb.unsqueeze(1) - model.protos.unsqueeze(0)) ** 2).sum(-1)
    proto = nn.functional.cross_entropy(-d, c)
    r = (pred.squeeze(1) - y).abs()
    huber = torch.where(r < 1, 0.5 * r ** 2, r - 0.5).mean()
    rbf = torch.exp(-((emb.unsqueeze(1) - fixed_centers) ** 2).sum(-1)).mean()
    loss = mse + proto + huber + 0.01 * rbf
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 4))
