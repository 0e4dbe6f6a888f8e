# The language model of bug_padding_in_loss_no_padding_idx.py (no padding_idx, batches
# padded with 0), with the loss ignoring the padding: ignore_index=0. Correct code.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
V, T = 40, 12


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, 16)
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0)
        self.head = nn.Linear(16, V)

    def forward(self, idx):
        causal = nn.Transformer.generate_square_subsequent_mask(idx.size(1))
        h = self.layer(self.wte(idx), src_mask=causal, src_key_padding_mask=idx == 0,
                       is_causal=True)
        return self.head(h)


model = LM()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(4):
    lengths = torch.randint(T // 2, T + 1, (8,))
    x = torch.randint(1, V, (8, T)) * (torch.arange(T)[None] < lengths[:, None])
    y = torch.roll(x, -1, 1)
    y[:, -1] = 0
    logits = model(x)
    loss = nn.functional.cross_entropy(logits.view(-1, V), y.view(-1), ignore_index=0)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
