# Recurrent layers used in their own layouts: a sequence-first GRU classifier
# over [T, N, E] with per-sample targets, a sequence-first language model whose
# flattened per-position targets are [T * N], one long sequence as a batch of
# one ([T, 1, F]) with a target per step, and a batch_first LSTM.
# Correct code.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
emb, gru, head = nn.Embedding(100, 32), nn.GRU(32, 48), nn.Linear(48, 3)
opt = torch.optim.Adam([*emb.parameters(), *gru.parameters(), *head.parameters()], lr=1e-3)
for step in range(6):
    x, y = torch.randint(0, 100, (20, 16)), torch.randint(0, 3, (16,))
    out, h = gru(emb(x))
    loss = nn.functional.cross_entropy(head(h[-1]), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("gru", round(loss.item(), 4))

lm, dec = nn.LSTM(32, 48), nn.Linear(48, 100)
opt = torch.optim.SGD([*emb.parameters(), *lm.parameters(), *dec.parameters()], lr=0.5)
for step in range(6):
    data = torch.randint(0, 100, (21, 8))
    out, _ = lm(emb(data[:-1]))
    loss = nn.functional.cross_entropy(dec(out).view(-1, 100), data[1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
print("lm", round(loss.item(), 4))

cell, reg = nn.LSTM(1, 16), nn.Linear(16, 1)
opt = torch.optim.Adam([*cell.parameters(), *reg.parameters()], lr=1e-2)
series = torch.sin(torch.linspace(0, 12, 61))
for step in range(6):
    out, _ = cell(series[:-1].view(60, 1, 1))
    loss = nn.functional.mse_loss(reg(out).view(60), series[1:])
    opt.zero_grad()
    loss.backward()
    opt.step()
print("series", round(loss.item(), 4))

bf, cls = nn.LSTM(32, 48, batch_first=True), nn.Linear(48, 2)
opt = torch.optim.Adam([*emb.parameters(), *bf.parameters(), *cls.parameters()], lr=1e-3)
for step in range(6):
    x, y = torch.randint(0, 100, (16, 20)), torch.randint(0, 2, (16,))
    out, _ = bf(emb(x))
    loss = nn.functional.cross_entropy(cls(out[:, -1]), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print("batch first", round(loss.item(), 4))
