# The shape of PyTorch's transfer-learning tutorial: for each epoch, a 'train' and a
# 'val' phase; model.train()/model.eval() per phase, optimizer.zero_grad() at every
# batch of both phases, torch.set_grad_enabled(phase == "train"), the best weights
# kept with copy.deepcopy(model.state_dict()), StepLR per epoch. Correct code.
# expect: none
import copy

import torch
from torch import nn


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


torch.manual_seed(0)
model = nn.Sequential(block(3, 8), nn.MaxPool2d(2), block(8, 16), nn.AdaptiveAvgPool2d(1),
                      nn.Flatten(), nn.Dropout(0.2), nn.Linear(16, 2))
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=7, gamma=0.1)
loaders = {phase: [(torch.randn(8, 3, 16, 16), torch.randint(0, 2, (8,))) for _ in range(3)]
           for phase in ("train", "val")}
best_acc, best_wts = 0.0, copy.deepcopy(model.state_dict())
for epoch in range(2):
    for phase in ("train", "val"):
        model.train() if phase == "train" else model.eval()
        running_loss, running_corrects = 0.0, 0
        for inputs, labels in loaders[phase]:
            optimizer.zero_grad()
            with torch.set_grad_enabled(phase == "train"):
                outputs = model(inputs)
                _, preds = torch.max(outputs, 1)
                loss = criterion(outputs, labels)
                if phase == "train":
                    loss.backward()
                    optimizer.step()
            running_loss += loss.item() * inputs.size(0)
            running_corrects += torch.sum(preds == labels.data).item()
        if phase == "train":
            scheduler.step()
        acc = running_corrects / 24
        if phase == "val" and acc > best_acc:
            best_acc, best_wts = acc, copy.deepcopy(model.state_dict())
model.load_state_dict(best_wts)
