# CORRECT: sampler.set_epoch(epoch) before each epoch; a peek at one batch first,
# and a non-shuffling evaluation sampler iterated after every epoch.
# expect: none
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

torch.manual_seed(0)
X, Y = torch.randn(256, 12), torch.randint(0, 4, (256,))
train, val = TensorDataset(X[:192], Y[:192]), TensorDataset(X[192:], Y[192:])
sampler = DistributedSampler(train, num_replicas=2, rank=0, shuffle=True)
loader = DataLoader(train, batch_size=32, sampler=sampler)
val_loader = DataLoader(val, batch_size=32,
                        sampler=DistributedSampler(val, num_replicas=2, rank=0, shuffle=False))
model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
crit = nn.CrossEntropyLoss()
xb, yb = next(iter(loader))
print("batch", tuple(xb.shape))
for epoch in range(3):
    sampler.set_epoch(epoch)
    model.train()
    for xb, yb in loader:
        opt.zero_grad()
        loss = crit(model(xb), yb)
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        correct = sum((model(xv).argmax(1) == yv).sum().item() for xv, yv in val_loader)
    print(f"epoch {epoch} loss {loss.item():.4f} correct {correct}")
