"""CIFAR-10 without a network, which no lesson teaches: notebook 04 teaches torchvision's.

``BLITZ_CIFAR10=full``: torchvision's CIFAR-10 (download bounded in time); ``subset``: the
6,000 images of shared/data/README.md, from the ``.npz`` named by ``BLITZ_CIFAR10_SUBSET``
or cut from the full dataset, checked either way; unset (``auto``): the full dataset if it
can be had, else the subset file. Every failure is one message saying how to fix it.
"""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from PIL import Image
from torch.utils.data import Dataset

SUBSET_ENV = "BLITZ_CIFAR10_SUBSET"
CHOICE_ENV = "BLITZ_CIFAR10"
SUBSET_SHA256 = "6be54dd6081083a07e384e2fce16cf3645d9d612807cbbeb2899d1278bfe3a75"
# _arrays_sha256 of the subset: the same whether read from the file or cut from the full set
SUBSET_ARRAYS_SHA256 = "c3ee9a1dfe4ec2032573ee14364e147a826254471182881e009b63cee43ee33d"
DOWNLOAD_TIMEOUT_S = 60.0  # seconds without a byte before a download gives up
FULL_BATCH, PER_BATCH = 10_000, 1_000  # images per torchvision batch file; the subset's share


class CIFAR10Unavailable(RuntimeError):
    """Neither the offline subset nor the full dataset (download or local copy) could be used."""


class SubsetError(ValueError):
    """The offline subset is missing, unreadable, corrupt, truncated or not the subset."""


class CIFAR10Data(NamedTuple):
    train: Dataset
    test: Dataset
    classes: tuple[str, ...]
    source: str


class _Arrays(Dataset):
    """Like torchvision's CIFAR10: ``.data`` (N x 32 x 32 x 3 uint8), ``.targets`` (ints),
    ``.classes``; an item is ``(transform(PIL image), label)``."""

    def __init__(self, data: np.ndarray, targets: Any, classes: tuple, transform) -> None:
        self.data, self.targets, self.classes = data, [int(t) for t in targets], list(classes)
        self.transform = transform

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        img = Image.fromarray(self.data[index])  # a PIL image, as torchvision gives
        return img if self.transform is None else self.transform(img), self.targets[index]


def _subset(arrays, classes: tuple, transform, test_transform, how: str) -> CIFAR10Data:
    x_train, y_train, x_test, y_test = arrays
    train = _Arrays(x_train, y_train, classes, transform)
    test = _Arrays(x_test, y_test, classes, test_transform)
    source = f"CIFAR-10 subset: {len(train):,} training / {len(test):,} test images, {how}"
    return CIFAR10Data(train, test, classes, source)


def _load_subset_file(path: str | Path, transform, test_transform) -> CIFAR10Data:
    path = Path(path).expanduser()
    fix = f"Fix it: copy a good cifar10-subset.npz (see shared/data/README.md) to {path}, or "
    fix += f"unset {SUBSET_ENV} to let torchvision download the full CIFAR-10 instead."
    if not path.is_file():
        raise SubsetError(f"{SUBSET_ENV} points to {path}, which is not a file. {fix}")
    try:
        with open(path, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        if digest != SUBSET_SHA256:  # past this check, every array is known to be right
            what = f"the CIFAR-10 subset at {path} ({path.stat().st_size:,} bytes)"
            why = f"has sha256 {digest}, expected {SUBSET_SHA256}"
            raise SubsetError(f"{what} {why}: corrupt, truncated or not the subset. {fix}")
        with np.load(path, allow_pickle=False) as npz:
            arrays = [npz[k] for k in ("x_train", "y_train", "x_test", "y_test", "classes")]
    except OSError as err:  # permissions, the usual cause, have a one-line fix; or I/O
        chmod = f" Make it readable: chmod a+r {path}." if isinstance(err, PermissionError) else ""
        why = f"cannot read the CIFAR-10 subset at {path} ({type(err).__name__}: {err})."
        raise SubsetError(f"{why}{chmod} {fix}") from err
    classes = tuple(arrays.pop().tolist())
    return _subset(arrays, classes, transform, test_transform, f"from the file in ${SUBSET_ENV}")


def _arrays_sha256(x_train: Any, y_train: Any, x_test: Any, y_test: Any) -> str:
    """sha256 of the images (uint8) and labels (int64), whatever container holds them."""
    digest = hashlib.sha256()
    names, dtypes = ("x_train", "y_train", "x_test", "y_test"), (np.uint8, "<i8") * 2
    for name, a, dtype in zip(names, (x_train, y_train, x_test, y_test), dtypes, strict=True):
        arr = np.ascontiguousarray(np.asarray(a).astype(dtype))
        digest.update(name.encode() + str(arr.shape).encode() + arr.tobytes())
    return digest.hexdigest()


def subset_from_full(train: Any, test: Any) -> tuple[np.ndarray, ...]:
    """``x_train, y_train, x_test, y_test`` of the subset, cut from the full CIFAR-10: the first
    1,000 images of each of the 5 training batches (10,000 each) and of the test set."""
    if len(train.data) != 5 * FULL_BATCH or len(test.data) != FULL_BATCH:
        got = f"{len(train.data):,} / {len(test.data):,}"
        raise ValueError(f"expected the full CIFAR-10 (50,000 / 10,000 images), got {got}")
    rows = np.concatenate([np.arange(b * FULL_BATCH, b * FULL_BATCH + PER_BATCH) for b in range(5)])
    y_train = np.asarray(train.targets, dtype=np.int64)[rows]
    y_test = np.asarray(test.targets[:PER_BATCH], dtype=np.int64)
    return np.asarray(train.data[rows]), y_train, np.asarray(test.data[:PER_BATCH]), y_test


def _partial_copy_note(root: Path) -> str:
    folder = root.resolve() / "cifar-10-batches-py"
    if not folder.is_dir():
        return ""
    archive = folder.with_name("cifar-10-python.tar.gz")
    return (
        f" A partial or damaged copy is at {folder}: delete that folder (and {archive} if "
        "present) and run again."
    )


def _full_cifar10(root: Path, transform, test_transform, download: bool, choice: str) -> tuple:
    """torchvision's CIFAR-10, with a bounded download and one clear error."""
    from torchvision.datasets import CIFAR10  # here: the subset file does not need torchvision

    # torchvision downloads with urllib without a timeout: a server that accepts and never
    # answers would hang the notebook. The default socket timeout bounds every read.
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(DOWNLOAD_TIMEOUT_S)
    try:
        train = CIFAR10(root, train=True, download=download, transform=transform)
        return train, CIFAR10(root, train=False, download=download, transform=test_transform)
    except Exception as err:  # URLError, HTTPError, OSError, timeouts, torchvision's errors
        # full never tries the subset, and setting its file alone would not help there;
        # auto and subset get here only without a subset file
        tried, use_subset = f"${SUBSET_ENV} is not set", "set "
        if choice == "full":
            tried, use_subset = f"not tried, {CHOICE_ENV}=full", f"set {CHOICE_ENV}=subset and "
        use_subset += f"{SUBSET_ENV}=/path/to/cifar10-subset.npz"
        how = "download it into" if download else "find it (download=False) in"
        raise CIFAR10Unavailable(
            f"CIFAR-10 is not available. Tried: (1) the offline subset: {tried}; "
            f"(2) torchvision: could not {how} {root.resolve()} ({type(err).__name__}: {err})."
            f"{_partial_copy_note(root)} Fix it in one of two ways: connect to the internet and "
            f"run again (torchvision downloads about 170 MB once), or {use_subset} (the "
            "offline subset, see shared/data/README.md)."
        ) from err
    finally:
        socket.setdefaulttimeout(previous)


def load_cifar10(
    root: str | Path = "data",
    transform: Any = None,
    test_transform: Any = None,
    download: bool = True,
) -> CIFAR10Data:
    """CIFAR-10's train and test sets, class names and which data was used (module docstring).

    ``test_transform`` defaults to ``transform``. Raises :class:`CIFAR10Unavailable` when
    nothing works and :class:`SubsetError` for a bad subset.
    """
    test_transform = transform if test_transform is None else test_transform
    choice = os.environ.get(CHOICE_ENV, "").strip().lower() or "auto"
    if choice not in ("auto", "full", "subset"):
        raise ValueError(
            f"{CHOICE_ENV}={os.environ[CHOICE_ENV]!r} is not one of auto, full, "
            "subset (unset means auto)"
        )
    subset_file, root = os.environ.get(SUBSET_ENV, "").strip(), Path(root)
    if choice == "subset" and subset_file:
        return _load_subset_file(subset_file, transform, test_transform)
    try:
        train, test = _full_cifar10(root, transform, test_transform, download, choice)
    except CIFAR10Unavailable:
        if choice != "auto" or not subset_file:
            raise
        data = _load_subset_file(subset_file, transform, test_transform)
        how = "downloaded" if download else "found"
        return data._replace(source=f"{data.source} (the full dataset could not be {how})")
    classes, where = tuple(train.classes), f"in {root.as_posix()}/"
    if choice != "subset":
        source = f"full CIFAR-10: {len(train):,} training / {len(test):,} test images {where}"
        return CIFAR10Data(train, test, classes, source)
    arrays = subset_from_full(train, test)
    if (digest := _arrays_sha256(*arrays)) != SUBSET_ARRAYS_SHA256:
        what = f"the 6,000 images cut from the full CIFAR-10 in {root.resolve()}"
        why = f"content sha256 {digest}, expected {SUBSET_ARRAYS_SHA256}"
        raise SubsetError(
            f"{what} are not the subset's ({why}): the download is damaged or not "
            f"CIFAR-10.{_partial_copy_note(root)}"
        )
    return _subset(arrays, classes, transform, test_transform, f"cut from the full dataset {where}")
