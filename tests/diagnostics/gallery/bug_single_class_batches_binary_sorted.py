# BUG: a fraud classifier whose training set is sorted by label (all legit rows, then all
# fraud rows) and loaded without shuffle=True: every batch holds one class.
# expect: single_class_batches ""
import torch
from torch import nn

torch.manual_seed(0)
x = torch.randn(256, 10)
y = (x[:, 0] + 0.3 * torch.randn(256) > 0).float()
order = torch.argsort(y)
ds = torch.utils.data.TensorDataset(x[order], y[order])
dl = torch.utils.data.DataLoader(ds, batch_size=32)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
crit = nn.BCEWithLogitsLoss()
for epoch in range(2):
    for xb, yb in dl:
        opt.zero_grad()
        loss = crit(model(xb).squeeze(1), yb)
        loss.backward()
        opt.step()
    print(epoch, round(loss.item(), 4))
