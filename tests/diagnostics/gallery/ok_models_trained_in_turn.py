# Three models trained one after another at the top level of a script, each
# loop leaving its last loss in a variable of its own (loss_a, loss_b, ...),
# then the first two fine-tuned in further loops with new names. Each variable
# keeps one graph alive, one per model: nothing grows from step to step.
# Correct code.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
x, y = torch.randn(64, 10), torch.randn(64, 1)
mse = nn.functional.mse_loss

model_a = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 1))
opt_a = torch.optim.SGD(model_a.parameters(), lr=0.01)
for step in range(12):
    opt_a.zero_grad()
    loss_a = mse(model_a(x), y)
    loss_a.backward()
    opt_a.step()
print("a", loss_a.item())

model_b = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 1))
opt_b = torch.optim.Adam(model_b.parameters(), lr=1e-3)
for step in range(12):
    opt_b.zero_grad()
    loss_b = mse(model_b(x), y)
    loss_b.backward()
    opt_b.step()
print("b", loss_b.item())

model_c = nn.Sequential(nn.Linear(10, 8), nn.ReLU(), nn.Linear(8, 1))
opt_c = torch.optim.SGD(model_c.parameters(), lr=0.01, momentum=0.9)
for step in range(12):
    opt_c.zero_grad()
    loss_c = mse(model_c(x), y)
    loss_c.backward()
    opt_c.step()
print("c", loss_c.item())

for step in range(12):
    opt_a.zero_grad()
    tuned_a = mse(model_a(x), y)
    tuned_a.backward()
    opt_a.step()
print("a tuned", tuned_a.item())

for step in range(12):
    opt_b.zero_grad()
    tuned_b = mse(model_b(x), y)
    tuned_b.backward()
    opt_b.step()
print("b tuned", tuned_b.item())
