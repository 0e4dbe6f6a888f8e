# Inference-only script: a model is built, its weights loaded from a state dict,
# put in eval mode, and run over a few batches under inference_mode; softmax
# probabilities are displayed. Correct code.
# expect: none
import io

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.5),
                      nn.Linear(32, 4))
buf = io.BytesIO()
torch.save(model.state_dict(), buf)
buf.seek(0)
model.load_state_dict(torch.load(buf))
model.eval()
with torch.inference_mode():
    for _ in range(3):
        probs = torch.softmax(model(torch.randn(8, 10)), dim=1)
        top = probs.argmax(1)
