"""ResNet-18 for 32 x 32 images, by hand: no lesson builds it; notebook 05 only trains it
(through ``scripts/train_ddp.py --model resnet18``) to measure how training scales.

Compared with the ImageNet ResNet-18 the stem is a single 3 x 3 convolution with
stride 1 and there is no max-pool: a 32 x 32 image would otherwise shrink to 8 x 8
before the first residual block. ``width`` scales every stage (64 is the classic
network; the notebook uses a narrower one so that it runs in seconds on a CPU).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class Residual(nn.Module):
    """Two 3 x 3 conv-BN layers plus a shortcut (a 1 x 1 conv when the shape changes)."""

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                nn.BatchNorm2d(out_channels),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    """CIFAR ResNet-18: 3 x 3 stem, no max-pool, 4 stages of 2 residual blocks (notebook 05).

    Stage widths are ``width * (1, 2, 4, 8)``; stages 2-4 halve the resolution
    (32 -> 16 -> 8 -> 4), then global average pooling and one linear layer.
    """

    def __init__(self, num_classes: int = 10, in_channels: int = 3, width: int = 64) -> None:
        super().__init__()
        if width < 1:
            raise ValueError(f"width must be >= 1, got {width}")
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, 1, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
        )
        stages = []
        channels = width
        for i, mult in enumerate((1, 2, 4, 8)):
            out = width * mult
            stride = 1 if i == 0 else 2
            stages.append(nn.Sequential(Residual(channels, out, stride), Residual(out, out)))
            channels = out
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 4:
            raise ValueError(f"ResNet18 expects N x C x H x W input, got shape {tuple(x.shape)}")
        x = self.stages(self.stem(x))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)
