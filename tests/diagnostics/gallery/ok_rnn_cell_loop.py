# CORRECT: an RNNCell called step by step from the training loop (many root
# calls per step), one backward over the unrolled sequence, hidden state
# re-initialised each batch.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
cell = nn.GRUCell(4, 16)
head = nn.Linear(16, 1)
opt = torch.optim.Adam(list(cell.parameters()) + list(head.parameters()), lr=1e-3)
for step in range(4):
    x, y = torch.randn(12, 8, 4), torch.randn(8, 1)
    h = torch.zeros(8, 16)
    for t in range(12):
        h = cell(x[t], h)
    loss = nn.functional.mse_loss(head(h), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
