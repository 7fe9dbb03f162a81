"""CIFAR-10 without internet, and for scripts, which no lesson teaches: notebook 04 teaches
torchvision's ``CIFAR10``, and calls :func:`load_cifar10` in plain sight when
``BLITZ_CIFAR10_SUBSET`` names the offline subset (DATA.md). Nothing here changes torchvision.
Every failure is one message saying how to fix it.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import math
import os
import pickle
import socket
import tarfile
import threading
import time
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.lib import format as fmt
from PIL import Image
from torch.utils.data import Dataset

SUBSET_ENV = "BLITZ_CIFAR10_SUBSET"
CHOICE_ENV = "BLITZ_CIFAR10"
ROOT_ENV = "BLITZ_CIFAR10_ROOT"  # where the full dataset is, whatever root a caller passes
SUBSET_SHA256 = "6be54dd6081083a07e384e2fce16cf3645d9d612807cbbeb2899d1278bfe3a75"
# _arrays_sha256 of the subset: the same whether read from the file or cut from the full set
SUBSET_ARRAYS_SHA256 = "c3ee9a1dfe4ec2032573ee14364e147a826254471182881e009b63cee43ee33d"
# Marks a folder built by tools/harness/full_from_subset.py: no md5 check there.
BUILT_FROM_SUBSET = "BUILT-FROM-THE-SUBSET.txt"
DOWNLOAD_TIMEOUT_S = 60.0  # seconds without a byte before a download gives up
DOWNLOAD_TOTAL_S = 30 * 60.0  # ...and in all (a trickle is never silent): 95 kB/s or more
ARCHIVE_MB = 170  # cifar-10-python.tar.gz
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
FULL_BATCH, PER_BATCH = 10_000, 1_000  # images per torchvision batch file; the subset's share
_NAMES = ("x_train", "y_train", "x_test", "y_test")
# The most bytes each array of the subset inflates to: its data (5 x 1,000 training images,
# 1,000 test images of 32 x 32 x 3 bytes, int64 labels, 10 names of up to 10 characters) and
# an .npy header (128 bytes in the published file; 4 KiB allowed). Checked in the zip's
# directory and the arrays' headers before any array is read: numpy allocates what a header
# declares, so a small file could otherwise claim gigabytes of memory.
_NPY_HEADER = 4096
_ARRAY_BYTES = {
    "x_train": 5 * PER_BATCH * 3072,
    "y_train": 5 * PER_BATCH * 8,
    "x_test": PER_BATCH * 3072,
    "y_test": PER_BATCH * 8,
    "classes": 10 * 10 * 4,
}
# ...and the most elements each holds: a bound on bytes alone multiplies by the itemsize, which
# a header may declare 0 (dtype <U0): 1e8 empty names take no bytes on paper and gigabytes
# once numpy makes Python strings of them.
_ARRAY_COUNT = {"x_train": 5 * PER_BATCH * 3072, "y_train": 5 * PER_BATCH}
_ARRAY_COUNT |= {"x_test": PER_BATCH * 3072, "y_test": PER_BATCH, "classes": 10}
# what each array must be: images bytes, labels int64, names unicode of 1 to 10 characters
_ARRAY_KIND = {"x_train": "u1", "y_train": "i8", "x_test": "u1", "y_test": "i8", "classes": "U"}
ARCHIVE_BYTES = 170_498_071  # cifar-10-python.tar.gz: a download stops past this size


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


def _subset(arrays: list, classes: tuple, transform, test_transform, how: str) -> CIFAR10Data:
    train = _Arrays(arrays[0], arrays[1], classes, transform)
    test = _Arrays(arrays[2], arrays[3], classes, test_transform)
    source = f"CIFAR-10 subset: {len(train):,} training / {len(test):,} test images, {how}"
    return CIFAR10Data(train, test, classes, source)


def _arrays_sha256(*arrays: Any) -> str:
    """sha256 of x_train, y_train, x_test, y_test: the images (uint8) and labels (int64) and
    their shapes, whatever container holds them."""
    digest = hashlib.sha256()
    for name, a, dtype in zip(_NAMES, arrays, (np.uint8, "<i8") * 2, strict=True):
        arr = np.ascontiguousarray(np.asarray(a).astype(dtype))
        digest.update(name.encode() + str(arr.shape).encode() + arr.tobytes())
    return digest.hexdigest()


def _kind_fits(dtype: np.dtype, kind: str) -> bool:
    """Whether an array's declared ``dtype`` is what the subset holds there: ``kind`` "U" is
    names of 1 to 10 characters (never 0: see _ARRAY_COUNT), otherwise that exact kind."""
    if kind == "U":
        return dtype.kind == "U" and 4 <= dtype.itemsize <= 40
    return dtype.kind == kind[0] and dtype.itemsize == int(kind[1:])


def _within_bounds(path: Path) -> bool:
    """Whether ``path`` is a zip of the subset's five arrays, none of which is larger than in
    the subset: read from the zip's directory and each array's header, before any data."""
    try:
        with zipfile.ZipFile(path) as zf:
            infos = {i.filename.removesuffix(".npy"): i for i in zf.infolist()}
            if infos.keys() != _ARRAY_BYTES.keys():
                return False
            for name, info in infos.items():
                with zf.open(info) as f:  # numpy's public header readers: formats 1.0, 2.0
                    read = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}
                    shape, _, dtype = read[fmt.read_magic(f)](f)
                count, kind = math.prod(shape), _ARRAY_KIND[name]
                if count > _ARRAY_COUNT[name] or not _kind_fits(dtype, kind):
                    return False
                nbytes = count * dtype.itemsize
                if nbytes > _ARRAY_BYTES[name] or info.file_size > nbytes + _NPY_HEADER:
                    return False
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):  # not a zip of .npy files
        return False
    return True


def _load_subset_file(path: str | Path, transform, test_transform) -> CIFAR10Data:
    path = Path(path).expanduser()
    fix = f"Fix it: copy a good cifar10-subset.npz (see DATA.md) to {path}, or "
    fix += f"unset {SUBSET_ENV} to let torchvision download the full CIFAR-10 instead."
    if not path.is_file():
        raise SubsetError(f"{SUBSET_ENV} points to {path}, which is not a file. {fix}")
    try:
        with open(path, "rb") as f:  # streamed: the bytes are hashed, never held
            digest = hashlib.file_digest(f, "sha256").hexdigest()
    except OSError as err:  # permissions, the usual cause, have a one-line fix; or I/O
        chmod = f" Make it readable: chmod a+r {path}." if isinstance(err, PermissionError) else ""
        why = f"cannot read the CIFAR-10 subset at {path} ({type(err).__name__}: {err})."
        raise SubsetError(f"{why}{chmod} {fix}") from err
    what = f"the CIFAR-10 subset at {path} ({path.stat().st_size:,} bytes)"
    why = f"has sha256 {digest}, expected {SUBSET_SHA256}"
    wrong = SubsetError(f"{what} {why}: corrupt, truncated or not the subset. {fix}")
    # Another file may still hold the subset's arrays (one write_subset made, another zip):
    # read only if its zip directory promises no more bytes than the subset's arrays take
    if digest != SUBSET_SHA256 and not _within_bounds(path):
        raise wrong
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = [npz[k] for k in (*_NAMES, "classes")]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        arrays = [None] * 5  # truncated, pickled, incomplete: not the subset
    dtypes = [getattr(a, "dtype", None) for a in arrays[:4]] == [np.uint8, np.int64] * 2
    ours = dtypes and arrays[4].tolist() == list(CLASSES)
    if digest != SUBSET_SHA256 and not (
        ours and _arrays_sha256(*arrays[:4]) == SUBSET_ARRAYS_SHA256
    ):
        raise wrong
    classes = tuple(arrays.pop().tolist())
    return _subset(arrays, classes, transform, test_transform, f"from {path.name}")


def subset_from_full(train: Any, test: Any) -> tuple[np.ndarray, ...]:
    """``x_train, y_train, x_test, y_test`` of the subset, cut from the full CIFAR-10: the first
    1,000 images of each of the 5 training batches (10,000 each) and of the test set."""
    if (got := (len(train.data), len(test.data))) != (5 * FULL_BATCH, FULL_BATCH):
        raise ValueError(f"expected the full CIFAR-10 (50,000 / 10,000 images), got {got}")
    rows = np.concatenate([np.arange(b * FULL_BATCH, b * FULL_BATCH + PER_BATCH) for b in range(5)])
    y_train = np.asarray(train.targets, dtype=np.int64)[rows]
    y_test = np.asarray(test.targets[:PER_BATCH], dtype=np.int64)
    return np.asarray(train.data[rows]), y_train, np.asarray(test.data[:PER_BATCH]), y_test


def _partial_copy_note(root: Path) -> str:
    if not (folder := root.resolve() / "cifar-10-batches-py").is_dir():
        return ""
    archive = folder.with_name("cifar-10-python.tar.gz")
    return (
        f" A partial or damaged copy is at {folder}: delete that folder (and {archive} if "
        "present) and run again."
    )


def _cut(train: Any, test: Any, root: Path) -> tuple[np.ndarray, ...]:
    """The subset cut from the full CIFAR-10 in ``root``, checked."""
    arrays = subset_from_full(train, test)
    if (digest := _arrays_sha256(*arrays)) != SUBSET_ARRAYS_SHA256:
        raise SubsetError(
            f"the 6,000 images cut from the full CIFAR-10 in {root.resolve()} are not the "
            f"subset's (content sha256 {digest}, expected {SUBSET_ARRAYS_SHA256}): the download "
            f"is damaged or not CIFAR-10.{_partial_copy_note(root)}"
        )
    return arrays


def _full_cifar10(root: Path, transform, test_transform, download: bool, choice: str) -> tuple:
    """torchvision's CIFAR-10, downloaded here (bounded in time) and read by torchvision from
    the extracted folder, with one clear error."""
    from torchvision import datasets  # here: the subset file does not need torchvision

    CIFAR10 = datasets.CIFAR10
    if (root / "cifar-10-batches-py" / BUILT_FROM_SUBSET).is_file():
        download = False

        class CIFAR10(datasets.CIFAR10):  # no md5 check: its files cannot have the real md5s
            def _check_integrity(self) -> bool:
                return True

            def _load_meta(self) -> None:
                with open(Path(self.root) / self.base_folder / self.meta["filename"], "rb") as f:
                    self.classes = pickle.load(f, encoding="latin1")[self.meta["key"]]
                self.class_to_idx = {name: i for i, name in enumerate(self.classes)}

    try:
        if download:
            _download_cifar10(root, CIFAR10)
        train = CIFAR10(root, train=True, download=False, transform=transform)
        return train, CIFAR10(root, train=False, download=False, transform=test_transform)
    except CIFAR10Unavailable:  # already says which file and what to do
        raise
    except Exception as err:  # URLError, HTTPError, OSError, timeouts, torchvision's errors
        # full never tries the subset, and setting its file alone would not help there;
        # auto and subset get here only without a subset file
        tried, use_subset = f"${SUBSET_ENV} is not set", "set "
        if choice == "full":
            tried, use_subset = f"not tried, {CHOICE_ENV}=full", f"set {CHOICE_ENV}=subset and "
        how = "download it into" if download else "find it (download=False) in"
        cause = " ".join(f"{type(err).__name__}: {err}".split())  # whole, on one line
        # from None: the cause is in the message; its traceback would bury it in 30 lines
        raise CIFAR10Unavailable(
            f"CIFAR-10 is not available. Tried: (1) the offline subset: {tried}; "
            f"(2) torchvision: could not {how} {root.resolve()} ({cause})."
            f"{_partial_copy_note(root)} Fix it in one of two ways: connect to the internet and "
            f"run again (torchvision downloads about {ARCHIVE_MB} MB once), or {use_subset}"
            f"{SUBSET_ENV}=/path/to/cifar10-subset.npz (the offline subset, see DATA.md)."
        ) from None


# --- the download: our own, bounded, so that no library is changed at run time --------------


def _whole(folder: Path, cifar10: type) -> bool:
    """Whether every file of the extracted ``folder`` has the md5 torchvision lists for it."""
    from torchvision.datasets.utils import check_integrity

    meta = [cifar10.meta["filename"], cifar10.meta["md5"]]
    files = [*cifar10.train_list, *cifar10.test_list, meta]
    return all(check_integrity(str(folder / name), md5) for name, md5 in files)


def _download_cifar10(root: Path, cifar10: type) -> None:
    """Make ``root/cifar-10-batches-py`` whole, as torchvision's ``download=True`` would: keep
    it if every file has its md5, else download the archive (unless a whole one is there),
    check its md5 and extract it. An archive there with another md5 is named, not replaced."""
    if _whole(root / cifar10.base_folder, cifar10):
        return
    archive = root / cifar10.filename
    if archive.is_file():  # a copy (DATA.md): ours is only renamed there once its md5 is right
        with open(archive, "rb") as f:
            md5 = hashlib.file_digest(f, "md5").hexdigest()
        if md5 != cifar10.tgz_md5:  # named, never downloaded over: it is someone's file
            raise CIFAR10Unavailable(
                f"the CIFAR-10 archive {archive.resolve()} is damaged or incomplete "
                f"({archive.stat().st_size:,} bytes, md5 {md5}, expected {cifar10.tgz_md5}): "
                "copy a whole cifar-10-python.tar.gz there again (DATA.md), or delete it to "
                f"let torchvision download it (about {ARCHIVE_MB} MB, needs the internet)."
            )
    else:
        _download(cifar10.url, archive, cifar10.tgz_md5)
    with tarfile.open(archive, "r:gz") as tar:
        tar.extractall(root, filter="data")  # no path outside root, no links, no devices


def _download(url: str, dest: Path, md5: str) -> None:
    """Download ``url`` to ``dest``: at most DOWNLOAD_TIMEOUT_S without a byte (connecting
    too), DOWNLOAD_TOTAL_S in all; into ``dest.partial``, renamed once its md5 is ``md5``."""
    # A server that trickles bytes is never silent: at the total deadline a timer shuts down
    # the sockets of urllib's connections (redirects, HTTPS, proxies from the environment).
    sockets: list[socket.socket] = []
    deadline, rate = time.monotonic() + DOWNLOAD_TOTAL_S, ARCHIVE_MB * 1000 / DOWNLOAD_TOTAL_S
    late = TimeoutError(
        f"the download took more than {DOWNLOAD_TOTAL_S:,.0f} s in total (its {ARCHIVE_MB} MB "
        f"need {rate:,.0f} kB/s or more to arrive in time)"
    )

    def shut() -> None:
        for sock in sockets:
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)  # a blocked read returns at once

    def tracked(connection: type) -> type:
        class Tracked(connection):
            def connect(self) -> None:
                super().connect()
                sockets.append(self.sock)
                if time.monotonic() >= deadline:  # connected after the timer went off
                    shut()

        return Tracked

    class Handler(urllib.request.HTTPHandler, urllib.request.HTTPSHandler):
        def http_open(self, req):
            return self.do_open(tracked(http.client.HTTPConnection), req)

        def https_open(self, req):
            return self.do_open(tracked(http.client.HTTPSConnection), req)

    class HttpsOnly(urllib.request.HTTPRedirectHandler):  # urllib would follow ftp:// too
        def redirect_request(self, req, fp, code, msg, headers, newurl):
            if urllib.parse.urlsplit(newurl).scheme != "https":
                raise OSError(f"{url} redirects to {newurl}: only https:// is followed")
            return super().redirect_request(req, fp, code, msg, headers, newurl)

    too_big = OSError(
        f"{url} sends more than the archive's {ARCHIVE_BYTES:,} bytes: not the archive; "
        "stopped before reading it whole"
    )

    dest.parent.mkdir(parents=True, exist_ok=True)
    partial, digest = dest.with_name(dest.name + ".partial"), hashlib.md5(usedforsecurity=False)
    timer = threading.Timer(DOWNLOAD_TOTAL_S, shut)
    timer.daemon = True
    timer.start()
    try:
        opener = urllib.request.build_opener(Handler, HttpsOnly)
        with opener.open(url, timeout=DOWNLOAD_TIMEOUT_S) as response, open(partial, "wb") as f:
            if (response.length or 0) > ARCHIVE_BYTES:  # its Content-Length, when sent
                raise too_big
            size = 0
            while chunk := response.read1(1 << 16):  # ends early when the timer shuts it down
                if (size := size + len(chunk)) > ARCHIVE_BYTES:  # a server may send no length
                    raise too_big
                f.write(chunk)
                digest.update(chunk)
        if time.monotonic() >= deadline:
            raise late
        if digest.hexdigest() != md5:
            raise OSError(
                f"the file downloaded from {url} has md5 {digest.hexdigest()}, expected {md5}: "
                "damaged on the way, or not the archive"
            )
        partial.replace(dest)
    except (OSError, http.client.HTTPException):
        if time.monotonic() >= deadline:  # whatever the shutdown made of it: not the cause
            raise late from None
        raise
    finally:
        timer.cancel()
        partial.unlink(missing_ok=True)


def load_cifar10(
    root: str | Path = "data",
    transform: Any = None,
    test_transform: Any = None,
    download: bool = True,
) -> CIFAR10Data:
    """CIFAR-10's train and test sets, class names and which data was used.

    ``BLITZ_CIFAR10=full``: torchvision's (download bounded in time); ``subset``: the 6,000
    images of DATA.md, from the file ``BLITZ_CIFAR10_SUBSET`` names or cut from the full set,
    checked either way; unset: that file when named, else the full set. ``test_transform``
    defaults to ``transform``. Raises :class:`CIFAR10Unavailable` when nothing works and
    :class:`SubsetError` for a bad subset.
    """
    test_transform = transform if test_transform is None else test_transform
    choice = os.environ.get(CHOICE_ENV, "").strip().lower() or "auto"
    if choice not in ("auto", "full", "subset"):
        raise ValueError(
            f"{CHOICE_ENV}={os.environ[CHOICE_ENV]!r} is not one of auto, full, "
            "subset (unset means auto)"
        )
    subset_file = os.environ.get(SUBSET_ENV, "").strip()
    root = Path(os.environ.get(ROOT_ENV, "").strip() or root)
    if subset_file and choice != "full":
        return _load_subset_file(subset_file, transform, test_transform)
    train, test = _full_cifar10(root, transform, test_transform, download, choice)
    classes, where = tuple(train.classes), f"in {root.as_posix()}/"
    if choice == "subset":
        how = f"cut from the full dataset {where}"
        return _subset(_cut(train, test, root), classes, transform, test_transform, how)
    source = f"full CIFAR-10: {len(train):,} training / {len(test):,} test images {where}"
    return CIFAR10Data(train, test, classes, source)


def write_subset(path: str | Path, root: str | Path = "data") -> Path:
    """Write the subset, cut from the full CIFAR-10 in ``root`` (downloaded there if needed),
    as the ``.npz`` file DATA.md describes: for a machine with internet but without the file.
    Raises :class:`CIFAR10Unavailable` or :class:`SubsetError` as :func:`load_cifar10` does."""
    path, root = Path(path), Path(root)
    train, test = _full_cifar10(root, None, None, True, "subset")
    arrays = _cut(train, test, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as f:  # a crash leaves no half file under the real name
        np.savez(f, **dict(zip(_NAMES, arrays, strict=True)), classes=np.array(train.classes))
    partial.replace(path)
    return path
