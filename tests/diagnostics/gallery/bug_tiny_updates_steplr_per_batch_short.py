# MISTAKE: StepLR(step_size=5, gamma=0.1), meant per epoch, stepped after every batch of a short
# run (40 batches): the rate is 1e-6 of its start by batch 30. FIX: sched.step() once per epoch.
# expect: tiny_updates ""
import torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.1)
X, Y = torch.randn(640, 10), torch.randint(0, 3, (640,))
for epoch in range(4):
    for i in range(0, 640, 64):
        opt.zero_grad(); loss = nn.functional.cross_entropy(model(X[i:i + 64]), Y[i:i + 64]); loss.backward(); opt.step()
        sched.step()
    print(epoch, round(loss.item(), 4), opt.param_groups[0]["lr"])
