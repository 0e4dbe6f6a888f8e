# BUG: the validation loop forgets model.eval() and torch.no_grad() both: its dropout keeps
# dropping units (noisy, pessimistic validation loss) and every forward builds a graph.
# FIX: model.eval() and `with torch.no_grad():` around the validation loop.
# expect: train_mode_in_eval "dropout"
# expect: grad_tracking_in_inference ""
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(8 * 7 * 7, 10)
    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.conv(x)), 2)
        return self.fc(self.dropout(torch.flatten(x, 1)))
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
criterion = nn.CrossEntropyLoss()
train = DataLoader(TensorDataset(torch.randn(128, 1, 14, 14), torch.randint(0, 10, (128,))), 32, shuffle=True)
val = DataLoader(TensorDataset(torch.randn(96, 1, 14, 14), torch.randint(0, 10, (96,))), 32)
for epoch in range(2):
    model.train()
    for x, y in train:
        opt.zero_grad()
        criterion(model(x), y).backward()
        opt.step()
    val_loss = 0.0
    for x, y in val:
        val_loss += criterion(model(x), y).item()
    print(epoch, val_loss / len(val))
