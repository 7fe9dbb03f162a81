"""What the lessons share: their own code, which ``make utils`` saves from the notebooks'
cells tagged ``save`` (tensors, neural_networks, cifar10, data_parallel: edit the notebook), and,
written by hand, the little that no lesson teaches (data, checkpoint, launch, distributed, cli)."""

from . import launch
from .checkpoint import CheckpointError, load_checkpoint, lock_folder, save_checkpoint, unwrap_model
from .cifar10 import (
    accuracy,
    amp_dtype_for,
    augment,
    better_net,
    conv_block,
    grad_scaler_for,
    imshow,
    one_cycle,
    sgd,
    to_tensors,
    train_one_epoch,
)
from .data import CIFAR10Data, CIFAR10Unavailable, SubsetError, load_cifar10, subset_from_full
from .data_parallel import ResNet18, allreduce, replicate, split_batch
from .distributed import exit_with_launcher
from .neural_networks import LeNet
from .tensors import get_device, seed_everything, try_all_gpus, try_gpu
