# FGSM adversarial training: the clean loss's backward gives the input gradient
# (model.zero_grad() afterwards throws the parameter gradients away on purpose),
# the adversarial example is built from x.grad.sign() and detached, then the
# optimizer steps on the loss of clean + adversarial batches. Correct code.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                      nn.Linear(8 * 7 * 7, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
crit = nn.CrossEntropyLoss()
for step in range(5):
    x, y = torch.rand(16, 1, 14, 14), torch.randint(0, 10, (16,))
    x.requires_grad_(True)
    loss = crit(model(x), y)
    model.zero_grad()
    loss.backward()
    x_adv = (x + 0.1 * x.grad.sign()).clamp(0, 1).detach()
    opt.zero_grad()
    loss = 0.5 * crit(model(x.detach()), y) + 0.5 * crit(model(x_adv), y)
    loss.backward()
    opt.step()
