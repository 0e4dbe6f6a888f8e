# Padded batches done right: a language model whose loss ignores the padding
# index, a seq2seq decoder whose padded targets are set to -100, and a text
# classifier whose embedding pads with 0 while its labels include class 0
# (its classes are not the vocabulary).
# Correct code.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
V, PAD = 60, 0


def padded(n_rows: int, width: int) -> torch.Tensor:
    batch = torch.full((n_rows, width), PAD)
    for i, n in enumerate(torch.randint(4, width, (n_rows,)).tolist()):
        batch[i, :n] = torch.randint(1, V, (n,))
    return batch


emb = nn.Embedding(V, 32, padding_idx=PAD)
rnn = nn.GRU(32, 64, batch_first=True)
out = nn.Linear(64, V)
lm_opt = torch.optim.Adam([*emb.parameters(), *rnn.parameters(), *out.parameters()], lr=1e-3)
for step in range(8):
    batch = padded(8, 16)
    h, _ = rnn(emb(batch[:, :-1]))
    loss = nn.functional.cross_entropy(out(h).reshape(-1, V), batch[:, 1:].reshape(-1),
                                       ignore_index=PAD)
    lm_opt.zero_grad()
    loss.backward()
    lm_opt.step()
print("lm", round(loss.item(), 4))

for step in range(8):
    batch = padded(8, 16)
    targets = batch[:, 1:].clone()
    targets[targets == PAD] = -100
    h, _ = rnn(emb(batch[:, :-1]))
    loss = nn.CrossEntropyLoss()(out(h).transpose(1, 2), targets)
    lm_opt.zero_grad()
    loss.backward()
    lm_opt.step()
print("decoder", round(loss.item(), 4))


class TextClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.EmbeddingBag(V, 32, mode="mean", padding_idx=PAD)
        self.tok = nn.Embedding(V, 32, padding_idx=PAD)
        self.head = nn.Linear(64, 3)

    def forward(self, x):
        return self.head(torch.cat([self.emb(x), self.tok(x).mean(1)], dim=1))


clf = TextClassifier()
clf_opt = torch.optim.SGD(clf.parameters(), lr=0.1)
for step in range(8):
    x, y = padded(32, 12), torch.randint(0, 3, (32,))
    loss = nn.functional.cross_entropy(clf(x), y)
    clf_opt.zero_grad()
    loss.backward()
    clf_opt.step()
print("classifier", round(loss.item(), 4))
