# CORRECT: an imbalanced binary task (5% positives), shuffled, BCEWithLogitsLoss with
# pos_weight; many batches hold no positive at all.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(512, 10)
y = (torch.rand(512) < 0.05).float()
dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16, shuffle=True)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1), nn.Sigmoid())
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
crit = nn.BCELoss()
for epoch in range(1):
    for xb, yb in dl:
        opt.zero_grad()
        loss = crit(model(xb).squeeze(1), yb)
        loss.backward()
        opt.step()
    print(epoch, round(loss.item(), 4))
