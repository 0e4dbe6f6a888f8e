# MISTAKE: MNIST-style Net whose fc1.bias starts at -10: F.relu(self.fc1(x)) in the middle of the forward
# is zero for every unit, so fc1 and conv1 get no gradient. FIX: default initialisation.
# expect: dead_activation "fc1"
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3); self.fc1 = nn.Linear(8 * 13 * 13, 64); self.fc2 = nn.Linear(64, 10)
        nn.init.constant_(self.fc1.bias, -10.0)
    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2).flatten(1)
        x = F.relu(self.fc1(x))
        return self.fc2(x)
model = Net(); opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
X, Y = torch.randn(320, 1, 28, 28), torch.randint(0, 10, (320,))
for epoch in range(3):
    for i in range(0, 320, 32):
        opt.zero_grad(); loss = F.cross_entropy(model(X[i:i+32]), Y[i:i+32]); loss.backward(); opt.step()
    print(epoch, f"{loss.item():.6f}")
