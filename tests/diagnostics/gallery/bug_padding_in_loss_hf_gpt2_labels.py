# MISTAKE: a GPT-2 fine-tuning loop on right-padded batches passes labels=input_ids, so
# the pad token (299 here, no padding_idx in the embedding) is a target: the model learns
# to predict padding and the loss is averaged over it. transformers shifts the labels
# inside the model and appends an ignored column, so the pad run ends one place before
# each row's end. FIX: labels = input_ids.masked_fill(attention_mask == 0, -100).
# requires: transformers
# expect: padding_in_loss ""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(vocab_size=300, n_positions=64, n_embd=32, n_layer=2, n_head=2))
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
g = torch.Generator().manual_seed(1)
for step in range(6):
    ids = torch.randint(0, 299, (4, 20), generator=g)
    lengths = torch.tensor([20, 17, 14, 9])
    mask = (torch.arange(20)[None] < lengths[:, None]).long()
    ids = ids.masked_fill(mask == 0, 299)
    loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    print(f"step {step}: loss {loss.item():.4f}")
