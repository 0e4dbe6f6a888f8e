# A nanoGPT-like loop: a tiny causal transformer with its own loss, AdamW with
# decayed and undecayed groups, a warmup + cosine lr set by hand on each group,
# gradient accumulation (loss / steps), bfloat16 autocast on the CPU, a
# GradScaler that is disabled (bfloat16 needs none, as nanoGPT does), gradient
# clipping after unscale_, zero_grad(set_to_none=True) after the step, and
# estimate_loss() in eval mode under no_grad. Correct code.
# expect: none
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, h, dropout=0.1, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d),
                                 nn.Dropout(0.1))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=64, d=32, h=4, n=2, T=16):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(T, d)
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.ModuleList(Block(d, h) for _ in range(n))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.tok.weight
        self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), 1))

    def forward(self, idx, targets=None):
        T = idx.size(1)
        x = self.drop(self.tok(idx) + self.pos(torch.arange(T)))
        for b in self.blocks:
            x = b(x, self.mask[:T, :T])
        logits = self.head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
        return logits, loss


torch.manual_seed(0)
data = torch.randint(0, 64, (2000,))


def get_batch(bs=4, T=16):
    ix = torch.randint(len(data) - T - 1, (bs,))
    x = torch.stack([data[i:i + T] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + T] for i in ix])
    return x, y


model = GPT()
decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                               {"params": no_decay, "weight_decay": 0.0}],
                              lr=1e-3, betas=(0.9, 0.95))
scaler = torch.amp.GradScaler("cpu", enabled=False)
ctx = torch.autocast("cpu", dtype=torch.bfloat16)
accum, warmup, max_iters, max_lr = 2, 2, 8, 1e-3


def get_lr(it):
    if it < warmup:
        return max_lr * (it + 1) / warmup
    ratio = (it - warmup) / (max_iters - warmup)
    return 0.1 * max_lr + 0.5 * (1 + math.cos(math.pi * ratio)) * 0.9 * max_lr


@torch.no_grad()
def estimate_loss():
    model.eval()
    losses = []
    for _ in range(2):
        x, y = get_batch()
        with ctx:
            _, loss = model(x, y)
        losses.append(loss.item())
    model.train()
    return sum(losses) / len(losses)


x, y = get_batch()
for it in range(max_iters):
    for g in optimizer.param_groups:
        g["lr"] = get_lr(it)
    if it % 4 == 0:
        estimate_loss()
    for micro in range(accum):
        with ctx:
            _, loss = model(x, y)
            loss = loss / accum
        x, y = get_batch()
        scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
