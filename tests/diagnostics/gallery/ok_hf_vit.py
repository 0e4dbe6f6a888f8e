# CORRECT: transformers ViT for image classification, tiny config, random weights.
# requires: transformers
# expect: none
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch
from transformers import ViTConfig, ViTForImageClassification

torch.manual_seed(0)
cfg = ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32,
                num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, num_labels=5)
model = ViTForImageClassification(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(4):
    px, y = torch.randn(4, 3, 16, 16), torch.randint(0, 5, (4,))
    loss = model(pixel_values=px, labels=y).loss
    opt.zero_grad()
    loss.backward()
    opt.step()
