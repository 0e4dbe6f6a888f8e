# CORRECT: a Transformer with a causal float mask full of -inf and a padding
# mask, plus functional attention with a -inf additive mask.
# expect: none
import torch
import torch.nn.functional as F
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab=50, d=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, vocab)

    def forward(self, tokens, mask, pad):
        h = self.encoder(self.emb(tokens), mask=mask, src_key_padding_mask=pad)
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        t = tokens.shape[1]
        bias = torch.full((t, t), float("-inf")).triu(1)
        h = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return self.out(h)


torch.manual_seed(0)
model = TinyLM()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
T = 12
mask = nn.Transformer.generate_square_subsequent_mask(T)
for step in range(4):
    tokens = torch.randint(0, 50, (4, T))
    pad = torch.zeros(4, T, dtype=torch.bool)
    pad[0, -3:] = True
    pad = torch.zeros(4, T).masked_fill(pad, float("-inf"))
    opt.zero_grad()
    logits = model(tokens, mask, pad)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, 50), tokens[:, 1:].reshape(-1))
    loss.backward()
    opt.step()
