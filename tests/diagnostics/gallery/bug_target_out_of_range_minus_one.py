# BUG: a tabular churn model whose labels are coded -1/+1 (SVM style) trained with
# BCEWithLogitsLoss, which needs 0/1 targets.
# expect: target_out_of_range "net.2"
import torch
from torch import nn

torch.manual_seed(0)
class Churn(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(9, 32), nn.ReLU(), nn.Linear(32, 1))
    def forward(self, x):
        return self.net(x).squeeze(-1)
model = Churn()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(200, 9)
y = torch.where(x[:, 0] > 0, 1.0, -1.0)
for step in range(6):
    idx = torch.randperm(200)[:32]
    opt.zero_grad()
    loss = nn.functional.binary_cross_entropy_with_logits(model(x[idx]), y[idx])
    loss.backward()
    opt.step()
    print(step, round(loss.item(), 4))
