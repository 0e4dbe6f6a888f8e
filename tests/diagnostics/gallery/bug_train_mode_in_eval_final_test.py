# MISTAKE: after training, the test set is scored in one batch under no_grad but
# without model.eval(): Dropout still drops units and BatchNorm uses the test
# batch's statistics. FIX: model.eval() before testing.
# expect: train_mode_in_eval "net.2"
# expect: train_mode_in_eval "net.3"
import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.BatchNorm1d(64),
                                 nn.Dropout(0.3), nn.Linear(64, 4))

    def forward(self, x):
        return self.net(x)


torch.manual_seed(0)
model = Classifier()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x_train, y_train = torch.randn(64, 20), torch.randint(0, 4, (64,))
for epoch in range(4):
    for i in range(0, 64, 16):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x_train[i:i + 16]), y_train[i:i + 16])
        loss.backward()
        opt.step()
x_test, y_test = torch.randn(32, 20), torch.randint(0, 4, (32,))
with torch.no_grad():
    accuracy = (model(x_test).argmax(1) == y_test).float().mean().item()
print(f"test accuracy {accuracy:.2f}")
