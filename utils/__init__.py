"""Small helpers shared by the notebooks; each one's docstring names where it is taught."""

from .device import device_summary, get_device, num_gpus, try_all_gpus, try_gpu
from .models import LeNet
from .parallel import to_data_parallel
from .plotting import denormalize, imshow, plot_curves
from .seed import seed_everything

__all__ = [
    "LeNet",
    "denormalize",
    "device_summary",
    "get_device",
    "imshow",
    "num_gpus",
    "plot_curves",
    "seed_everything",
    "to_data_parallel",
    "try_all_gpus",
    "try_gpu",
]
