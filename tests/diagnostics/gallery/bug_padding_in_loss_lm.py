# MISTAKE: a language model on padded batches whose loss counts the padding:
# the embedding knows padding_idx=0, the cross-entropy does not ignore it, so
# a third of the targets are padding and the model learns to predict it.
# FIX: F.cross_entropy(..., ignore_index=PAD).
# expect: padding_in_loss ""
import torch
from torch import nn

torch.manual_seed(0)
V, PAD = 60, 0


class LM(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(V, 32, padding_idx=PAD)
        self.rnn = nn.LSTM(32, 64, batch_first=True)
        self.out = nn.Linear(64, V)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


model = LM()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(10):
    lengths = torch.randint(4, 16, (8,))
    batch = torch.full((8, 16), PAD)
    for i, n in enumerate(lengths.tolist()):
        batch[i, :n] = torch.randint(1, V, (n,))
    logits = model(batch[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, V), batch[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
print(round(loss.item(), 4))
