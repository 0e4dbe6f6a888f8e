# BUG: a ReLU RNN whose recurrent weights have a gain of 1.5, unrolled over 60 steps, no
# clipping: the gradients explode to ~1e20 at the first backward (finite, but their norm
# overflows float32) and the update throws the weights to NaN.
# expect: exploding_gradient ""
# expect: non_finite ""
import torch
from torch import nn
torch.manual_seed(0)
rnn = nn.RNN(8, 64, batch_first=True, nonlinearity="relu")
head = nn.Linear(64, 1)
with torch.no_grad():
    rnn.weight_hh_l0.copy_(torch.eye(64) * 1.5)
opt = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.01)
for step in range(6):
    x, y = torch.rand(16, 60, 8), torch.randn(16, 1)
    h, _ = rnn(x); loss = nn.functional.mse_loss(head(h[:, -1]), y)
    opt.zero_grad(); loss.backward(); opt.step()
    print(loss.item())
