# CORRECT: plain gradient descent without an optimizer object: update under
# no_grad, then zero the gradients by hand.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(5, 1)
for step in range(5):
    x, y = torch.randn(32, 5), torch.randn(32, 1)
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= 0.1 * p.grad
            p.grad.zero_()
