"""CIFAR-10 that works online and offline, and DataLoader defaults that work in notebooks.

Taught in ``notebooks/04_cifar10.ipynb`` (and used again by ``notebooks/05_data_parallel.ipynb``).

:func:`load_cifar10` returns the train and test sets, the class names and a short
string saying which data it used:

* ``BLITZ_CIFAR10=full``: ``torchvision.datasets.CIFAR10`` loads the full dataset (50,000 /
  10,000 images) from ``root``, downloading it first if needed (bounded in time).
* ``BLITZ_CIFAR10=subset``: the 6,000-image subset described in
  ``../shared/data/README.md`` (5,000 train / 1,000 test images), read without pickle
  from the file named by ``BLITZ_CIFAR10_SUBSET``, or cut from the full dataset
  (:func:`subset_from_full`); either way its contents are checked against one digest.
* Unset (``auto``): the full dataset if it is on disk or can be downloaded, otherwise the
  subset file if ``BLITZ_CIFAR10_SUBSET`` names one.

Both paths give datasets that behave alike: ``.data`` is ``N x 32 x 32 x 3`` uint8,
``.targets`` a list of ints, ``.classes`` the ten names, and indexing returns
``(transform(PIL image), label)``.
"""

from __future__ import annotations

import hashlib
import os
import socket
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from .device import num_gpus

SUBSET_ENV = "BLITZ_CIFAR10_SUBSET"
SUBSET_SHA256 = "6be54dd6081083a07e384e2fce16cf3645d9d612807cbbeb2899d1278bfe3a75"
# sha256 of the subset's arrays (subset_arrays_sha256): the same from the file or the cut.
SUBSET_ARRAYS_SHA256 = "c3ee9a1dfe4ec2032573ee14364e147a826254471182881e009b63cee43ee33d"
CHOICE_ENV = "BLITZ_CIFAR10"
CHOICES = ("auto", "full", "subset")
FULL_BATCH = 10_000  # images per torchvision batch file
PER_BATCH = 1_000  # images the subset takes from the start of each batch file
DOWNLOAD_TIMEOUT_S = 60.0  # seconds without a byte before a download gives up
CIFAR10_CLASSES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)
_SUBSET_ARRAYS = ("x_train", "y_train", "x_test", "y_test", "classes")


class CIFAR10Unavailable(RuntimeError):
    """Neither the offline subset nor the full dataset (download or local copy) could be used."""


class SubsetError(ValueError):
    """The offline subset file is missing, corrupt, truncated or not the CIFAR-10 subset."""


class CIFAR10Data(NamedTuple):
    """What :func:`load_cifar10` returns (notebook 04)."""

    train: Dataset
    test: Dataset
    classes: tuple[str, ...]
    source: str


class CIFAR10Arrays(Dataset):
    """CIFAR-10 images held in memory, with the interface of ``torchvision.datasets.CIFAR10``.

    ``data`` is ``N x 32 x 32 x 3`` uint8 (HWC, RGB), ``targets`` a list of ints; an
    item is ``(transform(PIL image), target_transform(label))``, as in torchvision.
    Used for the offline subset (notebook 04).
    """

    def __init__(
        self,
        data: np.ndarray,
        targets: list[int],
        classes: tuple[str, ...] = CIFAR10_CLASSES,
        transform: Callable[[Image.Image], Any] | None = None,
        target_transform: Callable[[int], Any] | None = None,
        train: bool = True,
    ) -> None:
        if data.ndim != 4 or data.shape[1:] != (32, 32, 3) or data.dtype != np.uint8:
            raise ValueError(
                f"expected N x 32 x 32 x 3 uint8 images, got {data.shape} {data.dtype}"
            )
        if len(targets) != len(data):
            raise ValueError(f"{len(data)} images but {len(targets)} labels")
        self.data = data
        self.targets = [int(t) for t in targets]
        self.classes = list(classes)
        self.class_to_idx = {name: i for i, name in enumerate(self.classes)}
        self.transform = transform
        self.target_transform = target_transform
        self.train = train

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        img: Any = Image.fromarray(self.data[index])  # PIL, exactly like torchvision
        target: Any = self.targets[index]
        if self.transform is not None:
            img = self.transform(img)
        if self.target_transform is not None:
            target = self.target_transform(target)
        return img, target

    def __repr__(self) -> str:
        split = "train" if self.train else "test"
        return f"{type(self).__name__}({split}, {len(self)} images, transform={self.transform})"


def sha256_of(path: str | Path, chunk_size: int = 1 << 20) -> str:
    """Hex sha256 of a file, read in chunks (notebook 04 checks the subset with it)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


def _fixes(path: Path) -> str:
    return (
        f"Fix it: copy a good cifar10-subset.npz (see shared/data/README.md) to {path}, "
        f"or unset {SUBSET_ENV} to let torchvision download the full CIFAR-10 instead."
    )


def _unreadable(path: Path, err: OSError) -> SubsetError:
    """The file is there but cannot be read: say so, not "corrupt" (notebook 04)."""
    # Permissions are the usual cause and the one with a one-line fix.
    perms = f" Make it readable: chmod a+r {path}." if isinstance(err, PermissionError) else ""
    return SubsetError(
        f"cannot read the CIFAR-10 subset at {path} ({type(err).__name__}: {err}).{perms} "
        + _fixes(path)
    )


def load_cifar10_subset(
    path: str | Path,
    transform: Callable | None = None,
    test_transform: Callable | None = None,
    expected_sha256: str | None = SUBSET_SHA256,
) -> tuple[CIFAR10Arrays, CIFAR10Arrays, tuple[str, ...]]:
    """Load the offline CIFAR-10 subset (``.npz``, no pickle) as torchvision-like datasets.

    Raises :class:`SubsetError` with a message saying what is wrong and how to fix it
    when the file is missing, has the wrong sha256 (corrupt, truncated or another
    file), cannot be read as ``.npz`` or lacks the expected arrays. Pass
    ``expected_sha256=None`` to skip the checksum (tests use small synthetic files).
    Taught in notebook 04.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise SubsetError(f"{SUBSET_ENV} points to {path}, which is not a file. " + _fixes(path))
    if expected_sha256 is not None:
        try:
            actual = sha256_of(path)
        except OSError as err:  # unreadable: permissions, an I/O error
            raise _unreadable(path, err) from err
        if actual != expected_sha256.lower():
            size = path.stat().st_size
            raise SubsetError(
                f"the CIFAR-10 subset at {path} ({size:,} bytes) has sha256 {actual}, "
                f"expected {expected_sha256}: the file is corrupt, truncated or not the "
                "subset. " + _fixes(path)
            )
    try:
        with np.load(path, allow_pickle=False) as npz:
            missing = [k for k in _SUBSET_ARRAYS if k not in npz.files]
            if missing:
                raise SubsetError(
                    f"the file at {path} is not the CIFAR-10 subset: arrays {missing} are "
                    f"missing (it has {sorted(npz.files)}). " + _fixes(path)
                )
            arrays = {k: npz[k] for k in _SUBSET_ARRAYS}
    except SubsetError:
        raise
    except PermissionError as err:  # reached when the checksum is skipped
        raise _unreadable(path, err) from err
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as err:
        # np.load's own errors (bad zip, truncated member, object arrays) say nothing useful.
        raise SubsetError(
            f"cannot read the CIFAR-10 subset at {path}: it is corrupt or truncated "
            f"({type(err).__name__}: {err}). " + _fixes(path)
        ) from err

    classes = tuple(str(c) for c in arrays["classes"].tolist())
    if len(classes) != 10:
        raise SubsetError(f"{path}: expected 10 class names, got {len(classes)}. " + _fixes(path))
    splits = []
    for split in ("train", "test"):
        x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
        if x.ndim != 4 or x.shape[1:] != (32, 32, 3) or x.dtype != np.uint8:
            raise SubsetError(
                f"{path}: x_{split} should be N x 32 x 32 x 3 uint8, got {x.shape} {x.dtype}. "
                + _fixes(path)
            )
        if y.shape != (len(x),) or y.dtype.kind not in "iu" or len(x) == 0:
            raise SubsetError(
                f"{path}: y_{split} should hold {len(x)} integer labels, got {y.shape} "
                f"{y.dtype}. " + _fixes(path)
            )
        if y.min() < 0 or y.max() >= len(classes):
            raise SubsetError(f"{path}: y_{split} has labels outside 0..9. " + _fixes(path))
        splits.append((x, y))
    (x_train, y_train), (x_test, y_test) = splits
    # The real file: its arrays must be the ones a cut from the full download gives.
    digest = subset_arrays_sha256(x_train, y_train, x_test, y_test)
    if expected_sha256 == SUBSET_SHA256 and digest != SUBSET_ARRAYS_SHA256:
        raise SubsetError(f"{path}: array contents differ from the subset's. " + _fixes(path))
    tt = transform if test_transform is None else test_transform
    train = CIFAR10Arrays(x_train, y_train.tolist(), classes, transform, train=True)
    test = CIFAR10Arrays(x_test, y_test.tolist(), classes, tt, train=False)
    return train, test, classes


def subset_arrays_sha256(x_train: np.ndarray, y_train: Any, x_test: np.ndarray, y_test: Any) -> str:
    """sha256 of the four arrays' contents (images as uint8, labels as int64), in one order.

    The same 6,000 images give the same digest whether they came from the subset file or
    were cut from the full download (notebook 04).
    """
    digest = hashlib.sha256()
    for name, a, dtype in (
        ("x_train", x_train, np.uint8),
        ("y_train", y_train, "<i8"),
        ("x_test", x_test, np.uint8),
        ("y_test", y_test, "<i8"),
    ):
        arr = np.ascontiguousarray(np.asarray(a).astype(dtype))
        digest.update(name.encode())
        digest.update(str(arr.shape).encode())
        digest.update(arr.tobytes())
    return digest.hexdigest()


def subset_from_full(
    train: Any, test: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Cut the 6,000-image subset out of the full CIFAR-10 (``.data``/``.targets``).

    The subset is the first 1,000 images of each of the five training batches (torchvision
    concatenates them, 10,000 each) and the first 1,000 test images. Returns ``x_train,
    y_train, x_test, y_test`` as NumPy arrays. Taught in notebook 04.
    """
    if len(train.data) != 5 * FULL_BATCH or len(test.data) != FULL_BATCH:
        raise ValueError(
            f"expected the full CIFAR-10 (50,000 / 10,000 images), got {len(train.data):,} / "
            f"{len(test.data):,}"
        )
    rows = np.concatenate([np.arange(b * FULL_BATCH, b * FULL_BATCH + PER_BATCH) for b in range(5)])
    y_train_all = np.asarray(train.targets, dtype=np.int64)
    x_test = np.asarray(test.data[:PER_BATCH])
    y_test = np.asarray(test.targets[:PER_BATCH], dtype=np.int64)
    return np.asarray(train.data[rows]), y_train_all[rows], x_test, y_test


def _choice() -> str:
    value = os.environ.get(CHOICE_ENV, "").strip().lower() or "auto"
    if value not in CHOICES:
        raise ValueError(
            f"{CHOICE_ENV}={os.environ[CHOICE_ENV]!r} is not one of {', '.join(CHOICES)}: "
            f"use {CHOICE_ENV}=full (the whole dataset), {CHOICE_ENV}=subset (the 6,000-image "
            f"subset) or leave it unset (auto)"
        )
    return value


def _partial_copy_note(root: Path) -> str:
    folder = root / "cifar-10-batches-py"
    if not folder.is_dir():
        return ""
    return (
        f" A partial or damaged copy is at {folder.resolve()}: delete that folder (and "
        f"{(root / 'cifar-10-python.tar.gz').resolve()} if present) and run again."
    )


def _torchvision_cifar10(
    root: Path,
    transform: Callable | None,
    test_transform: Callable | None,
    download: bool,
    choice: str,
) -> tuple[Dataset, Dataset]:
    """The full CIFAR-10 through torchvision, with a bounded download and one clear error."""
    from torchvision.datasets import CIFAR10  # imported here: the subset file does not need it

    # torchvision downloads with urllib without a timeout: a server that accepts and never
    # answers would hang the notebook. The default socket timeout bounds every read.
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)
    try:
        train = CIFAR10(root, train=True, download=download, transform=transform)
        test = CIFAR10(root, train=False, download=download, transform=test_transform)
    except Exception as err:  # URLError, HTTPError, OSError, timeouts, torchvision's errors
        how = "download it into" if download else "find it (download=False) in"
        subset_setting = f"{SUBSET_ENV}=/path/to/cifar10-subset.npz"
        if choice == "full":  # the subset is never tried, and setting its file alone won't help
            tried = f"the offline subset: not tried, {CHOICE_ENV}=full"
            use_subset = f"set {CHOICE_ENV}=subset and {subset_setting}"
        else:  # auto and subset reach this only without a subset file
            tried = f"the offline subset: ${SUBSET_ENV} is not set"
            use_subset = f"set {subset_setting}"
        raise CIFAR10Unavailable(
            f"CIFAR-10 is not available. Tried: (1) {tried}; "
            f"(2) torchvision: could not {how} {root.resolve()} "
            f"({type(err).__name__}: {err}).{_partial_copy_note(root)} "
            "Fix it in one of two ways: connect to the internet and run again (torchvision "
            f"downloads about 170 MB once), or {use_subset} (the offline subset, see "
            "shared/data/README.md)."
        ) from err
    finally:
        socket.setdefaulttimeout(previous)
    return train, test


def load_cifar10(
    root: str | Path = "data",
    transform: Callable | None = None,
    test_transform: Callable | None = None,
    download: bool = True,
) -> CIFAR10Data:
    """CIFAR-10 train and test sets, class names and which data was used (notebook 04).

    ``BLITZ_CIFAR10`` chooses the data:

    * ``full``: ``torchvision.datasets.CIFAR10(root, download=download)``, 50,000 / 10,000;
    * ``subset``: the 6,000-image subset (5,000 / 1,000) -- from the file named by
      ``BLITZ_CIFAR10_SUBSET`` when set, otherwise cut from the full dataset with
      :func:`subset_from_full`; either way checked against one digest of its contents;
    * ``auto`` (unset): the full dataset if it is on disk or can be downloaded, otherwise
      the subset file if ``BLITZ_CIFAR10_SUBSET`` names one.

    ``test_transform`` defaults to ``transform``. When nothing works,
    :class:`CIFAR10Unavailable` says what was tried and the two ways to fix it; a bad
    subset file raises :class:`SubsetError`.
    """
    test_transform = transform if test_transform is None else test_transform
    choice = _choice()
    subset_file = os.environ.get(SUBSET_ENV, "").strip()
    root = Path(root)

    if choice == "subset" and subset_file:
        return _from_subset_file(subset_file, transform, test_transform)
    try:
        train, test = _torchvision_cifar10(root, transform, test_transform, download, choice)
    except CIFAR10Unavailable:
        if choice == "auto" and subset_file:
            data = _from_subset_file(subset_file, transform, test_transform)
            how = "downloaded" if download else "found"
            note = f" (the full dataset could not be {how})"
            return data._replace(source=data.source + note)
        raise
    classes = tuple(train.classes)
    if choice == "full" or choice == "auto":
        source = (
            f"full CIFAR-10: {len(train):,} training / {len(test):,} test images "
            f"in {root.as_posix()}/"
        )
        return CIFAR10Data(train, test, classes, source)

    x_train, y_train, x_test, y_test = subset_from_full(train, test)
    digest = subset_arrays_sha256(x_train, y_train, x_test, y_test)
    if digest != SUBSET_ARRAYS_SHA256:
        raise SubsetError(
            f"the 6,000 images cut from the full CIFAR-10 in {root.resolve()} are not the "
            f"subset's (content sha256 {digest}, expected {SUBSET_ARRAYS_SHA256}): the "
            f"download is damaged or not CIFAR-10.{_partial_copy_note(root)}"
        )
    sub_train = CIFAR10Arrays(x_train, y_train.tolist(), classes, transform, train=True)
    sub_test = CIFAR10Arrays(x_test, y_test.tolist(), classes, test_transform, train=False)
    source = (
        f"CIFAR-10 subset: {len(sub_train):,} training / {len(sub_test):,} test images, "
        f"cut from the full dataset in {root.as_posix()}/"
    )
    return CIFAR10Data(sub_train, sub_test, classes, source)


def _from_subset_file(
    path: str, transform: Callable | None, test_transform: Callable | None
) -> CIFAR10Data:
    train, test, classes = load_cifar10_subset(path, transform, test_transform)
    source = (
        f"CIFAR-10 subset: {len(train):,} training / {len(test):,} test images, "
        f"from the file in ${SUBSET_ENV}"
    )
    return CIFAR10Data(train, test, classes, source)


def to_tensors(
    dataset: Any,
    mean: tuple[float, float, float],
    std: tuple[float, float, float],
    n: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The first ``n`` (default: all) images of a CIFAR-10 dataset as one tensor, and labels.

    Reads ``dataset.data`` (``N x 32 x 32 x 3`` uint8) directly and gives what
    ``ToTensor()`` + ``Normalize(mean, std)`` would give image by image, as one
    ``n x 3 x 32 x 32`` float tensor -- fast batch training without a per-image pipeline.
    Taught in notebook 04 ("Going further"); used by ``bench/cifar10.py`` and
    ``scripts/train_ddp.py``.
    """
    total = len(dataset.data)
    n = total if n is None else n
    if not 0 < n <= total:
        raise ValueError(f"asked for {n} images but the dataset has {total}")
    X = torch.as_tensor(dataset.data[:n]).permute(0, 3, 1, 2).float().div(255)
    X = (X - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    return X, torch.as_tensor(dataset.targets[:n])


def make_loader(
    dataset: Dataset,
    batch_size: int,
    shuffle: bool = False,
    num_workers: int = 0,
    **kwargs: Any,
) -> DataLoader:
    """A ``DataLoader`` with defaults that work in a notebook on Linux, macOS and Windows.

    ``num_workers=0`` loads batches in the notebook's own process. Worker processes are
    started with *spawn* on macOS and Windows, which pickles the dataset and its
    transforms: anything defined in a notebook cell (a lambda, a local function or class)
    cannot be pickled there, and each worker re-imports everything (seconds per epoch on
    a small dataset). With workers, ``persistent_workers=True`` keeps them between
    epochs. ``pin_memory`` is on only when a CUDA GPU is usable. Other keyword arguments
    go to ``DataLoader``. Taught in notebook 04.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if num_workers > 0:
        kwargs.setdefault("persistent_workers", True)
    kwargs.setdefault("pin_memory", num_gpus() > 0)
    return DataLoader(
        dataset, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers, **kwargs
    )
