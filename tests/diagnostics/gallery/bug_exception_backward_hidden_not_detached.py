# MISTAKE: a character-level LSTM keeps its hidden state across batches without
# detaching it: the second batch's backward runs into the first batch's graph,
# already freed ("Trying to backward through the graph a second time").
# FIX: hidden = tuple(h.detach() for h in hidden) at the start of each batch.
# expect: exception "lstm"
import torch
from torch import nn


class CharRNN(nn.Module):
    def __init__(self, vocab=20, hidden=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, 8)
        self.lstm = nn.LSTM(8, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, vocab)

    def forward(self, x, state=None):
        out, state = self.lstm(self.embed(x), state)
        return self.fc(out), state


torch.manual_seed(0)
model = CharRNN()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
loss_fn = nn.CrossEntropyLoss()
text = torch.randint(0, 20, (4, 41))
state = None
for i in range(0, 40, 10):
    x, y = text[:, i:i + 10], text[:, i + 1:i + 11]
    opt.zero_grad()
    logits, state = model(x, state)
    loss = loss_fn(logits.reshape(-1, 20), y.reshape(-1))
    loss.backward()
    opt.step()
