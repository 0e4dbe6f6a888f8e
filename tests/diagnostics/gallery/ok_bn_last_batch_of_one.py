# CORRECT: BatchNorm trained on batches of 8 with a last batch of one per epoch
# (drop_last=False on 2-d conv input), and a batch-of-one inference in eval mode.
# expect: none
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
ds = torch.utils.data.TensorDataset(torch.randn(25, 3, 8, 8), torch.randint(0, 2, (25,)))
dl = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True)
for epoch in range(3):
    model.train()
    for x, y in dl:
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        print(epoch, model(torch.randn(1, 3, 8, 8)).argmax(1).item())
