# MISTAKE: an LSTM built without batch_first=True fed [N, T, E] batches from an
# embedding over [N, T] token ids: the recurrence runs across the 16 samples
# and treats the 20 positions as separate sequences; out[:, -1] is [N, H] all
# the same, so nothing raises.
# FIX: nn.LSTM(32, 64, batch_first=True).
# expect: rnn_batch_first "rnn"
import torch
from torch import nn

torch.manual_seed(0)


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(100, 32)
        self.rnn = nn.LSTM(32, 64)
        self.fc = nn.Linear(64, 2)

    def forward(self, x):
        out, _ = self.rnn(self.emb(x))
        return self.fc(out[:, -1])


model = Classifier()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(8):
    x, y = torch.randint(0, 100, (16, 20)), torch.randint(0, 2, (16,))
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(round(loss.item(), 4))
