"""The better CIFAR-10 recipe of notebook 04 ("Going further"), defined once.

Notebook 04 writes each piece in its cells, explains it, and checks it equal to the one here;
``bench/cifar10.py`` imports these. The pieces:

* :func:`better_net` -- three blocks of 3x3 convolution, batch normalization (optional, for
  the ablation), ReLU and 2x2 max-pooling, then global max-pooling and one linear layer;
* :func:`make_optimizer`, :func:`one_cycle`, :func:`make_loss_fn` -- SGD with Nesterov
  momentum and weight decay, the one-cycle schedule, label-smoothed cross-entropy;
* :func:`augment` -- a random left-right flip and a random 32x32 window of the image padded
  by 4 pixels, per image (train and test images keep the same size);
* :func:`train_one_epoch` and :func:`accuracy` -- training on tensors held in memory, with
  optional mixed precision on CUDA, and evaluation with optional flip averaging.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

PAD = 4  # pixels of zero padding before the random 32x32 crop
BATCH_SIZE = 64
MAX_LR = 0.1  # OneCycleLR's peak; it starts at MAX_LR / 25
MOMENTUM = 0.9  # the optimizer's own value; OneCycleLR cycles it between 0.95 and 0.85
WEIGHT_DECAY = 5e-4
LABEL_SMOOTHING = 0.1


def conv_block(c_in: int, c_out: int, batch_norm: bool = True) -> nn.Sequential:
    """3x3 convolution, BatchNorm (optional), ReLU, 2x2 max-pool.

    With batch norm the convolution has no bias (batch norm subtracts the mean anyway).
    """
    if not batch_norm:
        return nn.Sequential(
            nn.Conv2d(c_in, c_out, kernel_size=3, padding=1), nn.ReLU(), nn.MaxPool2d(2)
        )
    return nn.Sequential(
        nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(c_out),
        nn.ReLU(),
        nn.MaxPool2d(2),
    )


def better_net(width: int = 16, batch_norm: bool = True) -> nn.Sequential:
    """The small modern CNN of notebook 04 (``width`` channels in the first block)."""
    return nn.Sequential(
        conv_block(3, width, batch_norm),
        conv_block(width, 2 * width, batch_norm),
        conv_block(2 * width, 4 * width, batch_norm),
        nn.AdaptiveMaxPool2d(1),
        nn.Flatten(),
        nn.Linear(4 * width, 10),
    )


def make_optimizer(params) -> torch.optim.SGD:
    """SGD with Nesterov momentum and weight decay, the last optimizer of notebook 04."""
    return torch.optim.SGD(
        params, lr=MAX_LR, momentum=MOMENTUM, nesterov=True, weight_decay=WEIGHT_DECAY
    )


def one_cycle(
    optimizer: torch.optim.Optimizer, total_steps: int
) -> torch.optim.lr_scheduler.OneCycleLR:
    """``OneCycleLR`` with its defaults (start at max_lr / 25, peak after 30 % of the steps,
    momentum cycled 0.95 -> 0.85 -> 0.95), stepped once per batch (notebook 04)."""
    return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=MAX_LR, total_steps=total_steps)


def make_loss_fn() -> nn.CrossEntropyLoss:
    """Cross-entropy with label smoothing, the last loss of notebook 04."""
    return nn.CrossEntropyLoss(label_smoothing=LABEL_SMOOTHING)


def augment(X: torch.Tensor, pad: int = PAD) -> torch.Tensor:
    """Flip each image left-right with probability 1/2, then cut a random window of its
    original size out of the image padded with ``pad`` zeros on every side (notebook 04)."""
    n, _, h, w = X.shape
    flip = torch.rand(n) < 0.5
    X = torch.where(flip.view(-1, 1, 1, 1), X.flip(3), X)
    padded = nn.functional.pad(X, (pad, pad, pad, pad))
    corners = torch.randint(0, 2 * pad + 1, (n, 2)).tolist()
    return torch.stack(
        [x[:, i : i + h, j : j + w] for x, (i, j) in zip(padded, corners, strict=True)]
    )


def amp_dtype_for(device: torch.device) -> torch.dtype | None:
    """bfloat16 on CUDA GPUs that compute it natively, else float16 on CUDA; None elsewhere."""
    if device.type != "cuda":
        return None
    native_bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
    return torch.bfloat16 if native_bf16 else torch.float16


def train_one_epoch(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    X_train: torch.Tensor,
    y_train: torch.Tensor,
    batch_size: int,
    device: torch.device,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    augment_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> float:
    """One shuffled pass over tensors in memory; returns the epoch's mean training loss.

    The last incomplete batch is dropped. On CUDA the forward pass runs under autocast
    (:func:`amp_dtype_for`), with loss scaling for float16; the scheduler steps per batch.
    """
    amp_dtype = amp_dtype_for(device)
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0**10, enabled=amp_dtype == torch.float16)
    model.train()
    order = torch.randperm(len(X_train))
    steps, total = len(X_train) // batch_size, 0.0
    for k in range(steps):
        idx = order[k * batch_size : (k + 1) * batch_size]
        X = X_train[idx] if augment_fn is None else augment_fn(X_train[idx])
        X, y = X.to(device), y_train[idx].to(device)
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            loss = loss_fn(model(X), y)
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if scheduler is not None:
            scheduler.step()
        total += loss.item()
    return total / steps


def accuracy(
    model: nn.Module,
    X_test: torch.Tensor,
    y_test: torch.Tensor,
    device: torch.device,
    flips: bool = False,
) -> float:
    """Test accuracy; with ``flips``, each image's scores are averaged with its mirror's."""
    model.eval()
    with torch.no_grad():
        X = X_test.to(device)
        scores = model(X).float().softmax(1)
        if flips:
            scores = scores + model(X.flip(3)).float().softmax(1)
    return (scores.argmax(1).cpu() == y_test).float().mean().item()
