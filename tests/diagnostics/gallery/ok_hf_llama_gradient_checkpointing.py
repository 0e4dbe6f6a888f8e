# CORRECT: transformers Llama with gradient_checkpointing_enable() (transformers
# checkpoints each layer's forward; the recomputation runs during backward). No
# grad_tracking_in_inference, and one step per optimizer step.
# requires: transformers
# expect: none
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from transformers import LlamaConfig, LlamaForCausalLM

torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64)
model = LlamaForCausalLM(cfg)
model.gradient_checkpointing_enable()
model.config.use_cache = False
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(6):
    ids = torch.randint(0, 128, (2, 16))
    loss = model(input_ids=ids, labels=ids).loss
    opt.zero_grad()
    loss.backward()
    opt.step()
