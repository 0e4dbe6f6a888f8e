# CORRECT: truncated BPTT: LSTM hidden states carried across batches but
# detached each time.
# expect: none
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 16, batch_first=True)
        self.fc = nn.Linear(16, 1)

    def forward(self, x, state):
        out, state = self.lstm(x, state)
        return self.fc(out), state


torch.manual_seed(0)
model = Model()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
state = None
for step in range(6):
    x, y = torch.randn(4, 10, 8), torch.randn(4, 10, 1)
    if state is not None:
        state = tuple(s.detach() for s in state)
    opt.zero_grad()
    pred, state = model(x, state)
    loss = nn.functional.mse_loss(pred, y)
    loss.backward()
    opt.step()
