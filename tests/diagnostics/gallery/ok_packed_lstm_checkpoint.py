# CORRECT: an LSTM classifier over padded, packed sequences (lengths on the
# CPU), and a block run under activation checkpointing.
# expect: none
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence
from torch.utils.checkpoint import checkpoint


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(30, 16, padding_idx=0)
        self.lstm = nn.LSTM(16, 32, batch_first=True)
        self.block = nn.Sequential(nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 32))
        self.out = nn.Linear(32, 4)

    def forward(self, tokens, lengths):
        packed = pack_padded_sequence(self.emb(tokens), lengths, batch_first=True,
                                      enforce_sorted=False)
        _, (h, _) = self.lstm(packed)
        h = checkpoint(self.block, h[-1], use_reentrant=False)
        return self.out(h)


torch.manual_seed(0)
model = Classifier()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(4):
    lengths = torch.randint(3, 10, (8,))
    tokens = torch.randint(1, 30, (8, 10))
    for i, n in enumerate(lengths):
        tokens[i, n:] = 0
    y = torch.randint(0, 4, (8,))
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(tokens, lengths), y)
    loss.backward()
    opt.step()
