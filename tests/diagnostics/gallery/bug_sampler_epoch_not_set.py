# BUG: a hand-written data-parallel loop over a DistributedSampler(shuffle=True)
# that never calls sampler.set_epoch(epoch): every epoch sees the same order.
# expect: sampler_epoch_not_set ""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

torch.manual_seed(0)
X, Y = torch.randn(256, 12), torch.randint(0, 4, (256,))
data = TensorDataset(X, Y)
# this process is rank 0 of a 2-rank job (no process group is needed to shard)
sampler = DistributedSampler(data, num_replicas=2, rank=0, shuffle=True)
loader = DataLoader(data, batch_size=32, sampler=sampler)
model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
crit = nn.CrossEntropyLoss()
for epoch in range(3):
    for xb, yb in loader:
        opt.zero_grad()
        loss = crit(model(xb), yb)
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
