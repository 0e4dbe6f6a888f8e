# MISTAKE: time-major data [T, B, F] (from a seq2seq tutorial) into a GRU built with batch_first=True,
# read as out[-1]: the recurrence runs across the samples. FIX: batch_first=False (or transpose).
# expect: rnn_batch_first "rnn"
import torch, torch.nn as nn
torch.manual_seed(0)
T, B, F_ = 12, 16, 6
class Clf(nn.Module):
    def __init__(self):
        super().__init__(); self.rnn = nn.GRU(F_, 32, batch_first=True); self.fc = nn.Linear(32, 3)
    def forward(self, x):               # x: [T, B, F]
        out, _ = self.rnn(x)
        return self.fc(out[-1])
model = Clf(); opt = torch.optim.Adam(model.parameters(), lr=3e-3)
X = torch.randn(T, 256, F_); Y = (X.sum(0)[:, 0] > 0).long() + (X.sum(0)[:, 1] > 0).long()
for step in range(24):
    i = (step * B) % 256
    loss = nn.functional.cross_entropy(model(X[:, i:i+B]), Y[i:i+B])
    opt.zero_grad(); loss.backward(); opt.step()
    if step % 8 == 0: print(step, round(loss.item(), 6))
