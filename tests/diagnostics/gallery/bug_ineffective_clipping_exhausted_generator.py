# BUG: params = model.parameters() is a generator: the optimizer consumes it, so the
# clip gets an empty iterable every step and the LSTM's gradients are never clipped.
# expect: ineffective_clipping ""
import torch
from torch import nn
torch.manual_seed(0)
model = nn.LSTM(8, 32, batch_first=True)
head = nn.Linear(32, 1)
gen = model.parameters()
opt = torch.optim.Adam(gen, lr=1e-3)
ho = torch.optim.Adam(head.parameters(), lr=1e-3)
for step in range(6):
    x, y = torch.randn(8, 20, 8), torch.randn(8, 1)
    h, _ = model(x)
    loss = nn.functional.mse_loss(head(h[:, -1]), y)
    opt.zero_grad(); ho.zero_grad(); loss.backward()
    torch.nn.utils.clip_grad_norm_(gen, 1.0)
    opt.step(); ho.step()
