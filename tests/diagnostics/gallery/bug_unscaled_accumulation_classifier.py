# MISTAKE: gradient accumulation over 4 micro-batches (an effective batch of 64 on a
# machine that fits 16), but each micro-batch's mean loss is backpropagated as it is:
# the step sees the sum of 4 means, 4x the gradient of the mean over the 64 samples.
# FIX: (loss / accum_steps).backward().
# expect: unscaled_accumulation ""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(512, 20), torch.randint(0, 5, (512,)))
loader = DataLoader(data, batch_size=16, shuffle=True)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))
criterion = nn.CrossEntropyLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
accum_steps = 4
opt.zero_grad()
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y)
    loss.backward()                      # mistake: loss / accum_steps
    if (i + 1) % accum_steps == 0:
        opt.step()
        opt.zero_grad()
