"""utils.data: the offline subset, the torchvision path, and every way they can fail.

The failure cases use tiny synthetic ``.npz`` files and a monkeypatched torchvision
download, so these tests need neither the real subset nor a network.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
from pathlib import Path

import numpy as np
import pytest
import torch
import torchvision.transforms as T
from PIL import Image

import utils
from utils import data as data_mod
from utils.data import CHOICE_ENV, SUBSET_ENV, CIFAR10Unavailable, SubsetError, load_cifar10

REAL_SUBSET = Path(__file__).resolve().parents[2] / "shared" / "data" / "cifar10-subset.npz"
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


def write_npz(path: Path, n_train: int = 20, n_test: int = 10, **override) -> Path:
    rng = np.random.default_rng(0)
    arrays = {
        "x_train": rng.integers(0, 256, (n_train, 32, 32, 3), dtype=np.uint8),
        "y_train": np.arange(n_train, dtype=np.int64) % 10,
        "x_test": rng.integers(0, 256, (n_test, 32, 32, 3), dtype=np.uint8),
        "y_test": np.arange(n_test, dtype=np.int64) % 10,
        "classes": np.array(CIFAR10_CLASSES),
    }
    arrays.update(override)
    arrays = {k: v for k, v in arrays.items() if v is not None}
    np.savez(path, **arrays)
    return path


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def fake_subset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A valid synthetic subset whose checksum is the one load_cifar10 expects."""
    path = write_npz(tmp_path / "subset.npz")
    monkeypatch.setattr(data_mod, "SUBSET_SHA256", sha256_of(path))
    monkeypatch.setenv(SUBSET_ENV, str(path))
    monkeypatch.setenv(CHOICE_ENV, "subset")
    return path


@pytest.fixture(autouse=True)
def auto_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts from a learner's default: BLITZ_CIFAR10 (auto) and
    BLITZ_CIFAR10_SUBSET unset (the test contract sets both for the notebooks)."""
    monkeypatch.delenv(CHOICE_ENV, raising=False)
    monkeypatch.delenv(SUBSET_ENV, raising=False)


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The CIFAR-10 download fails as it does without a network."""
    calls: list[str] = []

    def offline(url: str, *args, **kwargs) -> None:
        calls.append(url)
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(data_mod, "_download", offline)
    monkeypatch.delenv(SUBSET_ENV, raising=False)
    return calls


def test_subset_behaves_like_torchvision_cifar10(fake_subset: Path) -> None:
    tf = T.Compose([T.ToTensor(), T.Normalize((0.5,) * 3, (0.5,) * 3)])
    train, test, classes, source = load_cifar10(transform=tf)
    assert classes == CIFAR10_CLASSES
    assert train.classes == list(CIFAR10_CLASSES)  # torchvision's type: a list
    assert train.data.shape == (20, 32, 32, 3) and train.data.dtype == np.uint8
    assert isinstance(train.targets, list) and all(type(t) is int for t in train.targets)
    assert len(train) == 20 and len(test) == 10
    img, label = train[3]
    assert img.shape == (3, 32, 32) and img.dtype == torch.float32
    assert -1.0 <= img.min() and img.max() <= 1.0
    assert label == 3 and type(label) is int
    # The image is the stored array, converted like torchvision does (HWC uint8 -> CHW).
    expected = torch.from_numpy(train.data[3]).permute(2, 0, 1).float() / 255 * 2 - 1
    assert torch.allclose(img, expected, atol=1e-6)
    assert source == "CIFAR-10 subset: 20 training / 10 test images, from subset.npz"


def test_subset_without_transform_returns_pil_and_test_transform_is_separate(
    fake_subset: Path,
) -> None:
    d = load_cifar10(transform=T.ToTensor(), test_transform=T.PILToTensor())
    assert d.train[0][0].dtype == torch.float32
    assert d.test[0][0].dtype == torch.uint8
    raw = load_cifar10()
    assert isinstance(raw.train[0][0], Image.Image)
    assert raw.train[0][0].size == (32, 32)


def test_real_subset_checksum_and_content(monkeypatch) -> None:
    if not REAL_SUBSET.is_file():
        pytest.skip(f"the real subset is not at {REAL_SUBSET}")
    monkeypatch.setenv(SUBSET_ENV, str(REAL_SUBSET))
    monkeypatch.setenv(CHOICE_ENV, "subset")
    train, test, classes, _ = load_cifar10()  # verifies the sha256
    assert (len(train), len(test)) == (5000, 1000)
    assert classes == CIFAR10_CLASSES
    # DATA.md: the official tutorial shows the first four test images as "cat ship ship plane".
    assert [classes[t] for t in test.targets[:4]] == ["cat", "ship", "ship", "airplane"]
    # the digest a cut from the full dataset is checked against is the file's
    arrays = (train.data, train.targets, test.data, test.targets)
    assert data_mod._arrays_sha256(*arrays) == data_mod.SUBSET_ARRAYS_SHA256


def test_no_network_and_no_subset_gives_one_clear_message(
    no_network: list[str], tmp_path: Path
) -> None:
    with pytest.raises(CIFAR10Unavailable) as info:
        load_cifar10(root=tmp_path / "data")
    msg = str(info.value)
    assert no_network, "the download was never attempted"
    assert f"${SUBSET_ENV} is not set" in msg  # what was tried: 1
    assert "could not download it into" in msg and "URLError" in msg  # what was tried: 2
    assert "connect to the internet" in msg  # fix 1
    assert f"{SUBSET_ENV}=/path/to/cifar10-subset.npz" in msg  # fix 2
    assert "Traceback" not in msg


def test_download_false_and_no_local_copy(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(SUBSET_ENV, raising=False)
    with pytest.raises(CIFAR10Unavailable, match="download=False"):
        load_cifar10(root=tmp_path, download=False)


def test_empty_env_var_means_not_set(no_network: list[str], tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(SUBSET_ENV, "  ")
    with pytest.raises(CIFAR10Unavailable, match="is not set"):
        load_cifar10(root=tmp_path)


def test_torchvision_path_is_used_without_the_env_var(tmp_path: Path, monkeypatch) -> None:
    import torchvision.datasets as tvd

    monkeypatch.delenv(SUBSET_ENV, raising=False)
    made = []

    class FakeCIFAR10(data_mod._Arrays):
        def __init__(self, root, train, download, transform):
            made.append((Path(root), train, download))
            n = 50 if train else 10
            super().__init__(
                np.zeros((n, 32, 32, 3), np.uint8), [0] * n, CIFAR10_CLASSES, transform
            )

    downloads: list[Path] = []
    monkeypatch.setattr(tvd, "CIFAR10", FakeCIFAR10)
    monkeypatch.setattr(data_mod, "_download_cifar10", lambda root, cls: downloads.append(root))
    d = load_cifar10(root=tmp_path / "data")
    assert downloads == [tmp_path / "data"]  # downloaded here, then read by torchvision
    assert made == [(tmp_path / "data", True, False), (tmp_path / "data", False, False)]
    data_dir = (tmp_path / "data").as_posix()
    assert d.source == f"full CIFAR-10: 50 training / 10 test images in {data_dir}/"
    assert d.classes == CIFAR10_CLASSES


def test_env_var_pointing_nowhere(no_network: list[str], tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(SUBSET_ENV, str(tmp_path / "nope.npz"))  # auto: the file, no download
    with pytest.raises(SubsetError, match=r"not a file.*unset BLITZ_CIFAR10_SUBSET"):
        load_cifar10(root=tmp_path / "data")


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage(path: Path) -> None:
    path.write_bytes(os.urandom(4096))


@pytest.mark.parametrize(
    "make_bad",
    [
        _truncated,
        _garbage,
        lambda p: write_npz(p, x_train=np.array([{"evil": 1}], dtype=object)),  # pickled
        lambda p: write_npz(p, y_test=None),  # an array missing
        lambda p: write_npz(p, x_train=np.zeros((20, 32, 32, 3), np.float32)),  # wrong dtype
    ],
    ids=["truncated", "garbage", "pickled arrays", "missing array", "wrong dtype"],
)
def test_a_file_that_is_not_the_subset_fails_the_checksum(
    tmp_path: Path, monkeypatch, make_bad
) -> None:
    """Whatever is wrong with the file, the sha256 is checked first: the one message."""
    bad = write_npz(tmp_path / "bad.npz")
    make_bad(bad)
    monkeypatch.setenv(SUBSET_ENV, str(bad))
    monkeypatch.setenv(CHOICE_ENV, "subset")
    with pytest.raises(
        SubsetError, match=r"has sha256 .*corrupt, truncated or not the subset\. Fix"
    ):
        load_cifar10()


def _inflating_npz(path: Path, x_train_rows: int) -> Path:
    """A subset file whose x_train (zeros, deflated) declares ``x_train_rows`` images: a small
    file whose arrays inflate far beyond the subset's size. Written in chunks, never held."""
    import zipfile

    arrays = {
        "y_train": np.zeros(5000, np.int64),
        "x_test": np.zeros((1000, 32, 32, 3), np.uint8),
        "y_test": np.zeros(1000, np.int64),
        "classes": np.array(CIFAR10_CLASSES),
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("x_train.npy", "w", force_zip64=True) as f:
            header = {"descr": "|u1", "fortran_order": False, "shape": (x_train_rows, 32, 32, 3)}
            np.lib.format.write_array_header_1_0(f, header)
            chunk = bytes(3072 * 1024)
            for _ in range(x_train_rows // 1024):
                f.write(chunk)
        for name, a in arrays.items():
            with zf.open(f"{name}.npy", "w") as f:
                np.lib.format.write_array(f, a)
    return path


@pytest.mark.timeout(120)
def test_a_small_subset_file_whose_arrays_inflate_is_refused_before_they_are_read(
    tmp_path: Path, monkeypatch
) -> None:
    # Rule: sizes are bounded before memory is spent. 64 times the subset's images, 1 GB
    # inflated, deflate to about a megabyte; refusing it must not allocate them.
    import tracemalloc

    bad = _inflating_npz(tmp_path / "bomb.npz", 64 * 5000)
    assert bad.stat().st_size < 2_000_000
    monkeypatch.setenv(SUBSET_ENV, str(bad))
    monkeypatch.setenv(CHOICE_ENV, "subset")
    tracemalloc.start()  # numpy reports its array allocations to tracemalloc
    try:
        with pytest.raises(SubsetError, match=r"has sha256 .*not the subset\. Fix") as info:
            load_cifar10()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "\n" not in str(info.value)
    assert peak < 20_000_000, f"{peak:,} bytes allocated before the refusal"


def test_a_header_that_declares_more_images_than_the_subset_is_refused_before_reading(
    tmp_path: Path, monkeypatch
) -> None:
    # numpy allocates what an .npy header declares, whatever data follows: bounded too.
    bad = _inflating_npz(tmp_path / "liar.npz", 5000)
    assert data_mod._within_bounds(bad)  # the subset's sizes, zeros: read, then refused
    with pytest.raises(SubsetError, match="not the subset"):
        monkeypatch.setenv(SUBSET_ENV, str(bad))
        load_cifar10()
    bad = _inflating_npz(tmp_path / "liar.npz", 5001)  # one image more than the subset
    assert not data_mod._within_bounds(bad)


def _zero_width_names(path: Path, count: int) -> Path:
    """A subset file (the other arrays right) whose ``classes`` declares ``count`` names of
    dtype <U0: 0 bytes on paper, whatever the count (issue 46, case 2)."""
    import zipfile

    arrays = {
        "x_train": np.zeros((5000, 32, 32, 3), np.uint8),
        "y_train": np.zeros(5000, np.int64),
        "x_test": np.zeros((1000, 32, 32, 3), np.uint8),
        "y_test": np.zeros(1000, np.int64),
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, a in arrays.items():
            with zf.open(f"{name}.npy", "w") as f:
                np.lib.format.write_array(f, a)
        with zf.open("classes.npy", "w") as f:
            header = {"descr": "<U0", "fortran_order": False, "shape": (count,)}
            np.lib.format.write_array_header_1_0(f, header)
    return path


@pytest.mark.timeout(60)
@pytest.mark.parametrize("count", [10**8, 2**40])
def test_names_of_zero_characters_are_bounded_by_count_not_bytes(
    tmp_path: Path, monkeypatch, count: int
) -> None:
    # Rule: a bound on bytes multiplies by the itemsize; <U0 makes it 0, so count is bounded too
    import tracemalloc

    bad = _zero_width_names(tmp_path / "names.npz", count)
    assert bad.stat().st_size < 200_000
    assert not data_mod._within_bounds(bad)
    monkeypatch.setenv(SUBSET_ENV, str(bad))
    monkeypatch.setenv(CHOICE_ENV, "subset")
    tracemalloc.start()
    try:
        with pytest.raises(SubsetError, match=r"not the subset\. Fix") as info:
            load_cifar10()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "\n" not in str(info.value)
    assert peak < 20_000_000, f"{peak:,} bytes allocated before the refusal"


def test_names_must_be_unicode_of_one_to_ten_characters(tmp_path: Path) -> None:
    assert data_mod._kind_fits(np.array(CIFAR10_CLASSES).dtype, "U")
    assert not data_mod._kind_fits(np.dtype("<U0"), "U")
    assert not data_mod._kind_fits(np.dtype("<U11"), "U")
    assert not data_mod._kind_fits(np.dtype("S10"), "U")
    assert data_mod._kind_fits(np.dtype("<i8"), "i8")
    assert not data_mod._kind_fits(np.dtype("<i4"), "i8")


# --- the same 6,000 images from the full download ------------------------------------------


@pytest.fixture(scope="module")
def full_download(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A torchvision-format cifar-10-batches-py holding the subset's images where the real
    full dataset has them (the first 1,000 of each batch), built by
    tools/harness/full_from_subset.py,
    without its marker: here it stands for a real download (md5 checked)."""
    if not REAL_SUBSET.is_file():
        pytest.skip(f"the real subset is not at {REAL_SUBSET}")
    from tools.harness import full_from_subset

    root = tmp_path_factory.mktemp("cifar") / "data"
    folder = full_from_subset.build(REAL_SUBSET, root)
    (folder / data_mod.BUILT_FROM_SUBSET).unlink()
    return root


@pytest.fixture
def offline_full(full_download: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The folder above accepted by torchvision (its md5 check bypassed here only)."""
    import torchvision.datasets as tvd
    import torchvision.datasets.cifar as cifar

    monkeypatch.setattr(tvd.CIFAR10, "_check_integrity", lambda self: True)
    monkeypatch.setattr(cifar, "check_integrity", lambda *args, **kwargs: True)
    monkeypatch.setattr(data_mod, "_whole", lambda *args: True)  # the download's own check
    monkeypatch.delenv(SUBSET_ENV, raising=False)
    return full_download


def test_the_cut_equals_the_subset_file(offline_full: Path) -> None:
    import torchvision.datasets as tvd

    train = tvd.CIFAR10(offline_full, train=True)
    test = tvd.CIFAR10(offline_full, train=False)
    cut = utils.subset_from_full(train, test)
    with np.load(REAL_SUBSET, allow_pickle=False) as z:
        for got, key in zip(cut, ("x_train", "y_train", "x_test", "y_test"), strict=True):
            assert np.array_equal(got, z[key]), key
    assert data_mod._arrays_sha256(*cut) == data_mod.SUBSET_ARRAYS_SHA256


def test_subset_choice_without_the_file_cuts_the_full_download(
    offline_full: Path, monkeypatch
) -> None:
    monkeypatch.setenv(CHOICE_ENV, "subset")
    d = load_cifar10(root=offline_full)
    assert (len(d.train), len(d.test)) == (5000, 1000)
    assert "cut from the full dataset" in d.source
    with np.load(REAL_SUBSET, allow_pickle=False) as z:
        assert np.array_equal(d.train.data, z["x_train"])
        assert d.train.targets == z["y_train"].tolist()


@pytest.mark.parametrize("choice", ["full", "auto"])
def test_full_and_auto_choices_give_the_full_dataset(
    offline_full: Path, monkeypatch, choice: str
) -> None:
    monkeypatch.setenv(CHOICE_ENV, choice)
    d = load_cifar10(root=offline_full)
    assert (len(d.train), len(d.test)) == (50_000, 10_000)
    assert d.source.startswith("full CIFAR-10: 50,000 training / 10,000 test images")


def test_a_damaged_full_download_is_not_taken_for_the_subset(
    offline_full: Path, monkeypatch
) -> None:
    import torchvision.datasets as tvd

    original = tvd.CIFAR10.__init__

    def damaged(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.data = self.data.copy()
        self.data[3, 0, 0, 0] ^= 1  # one bit of one image

    monkeypatch.setattr(tvd.CIFAR10, "__init__", damaged)
    monkeypatch.setenv(CHOICE_ENV, "subset")
    with pytest.raises(SubsetError, match="are not the subset's"):
        load_cifar10(root=offline_full)


def test_an_invalid_choice_is_named(monkeypatch) -> None:
    monkeypatch.setenv(CHOICE_ENV, "tiny")
    with pytest.raises(ValueError, match="BLITZ_CIFAR10='tiny' is not one of auto, full, subset"):
        load_cifar10()


def test_auto_takes_the_subset_file_when_it_is_named(
    no_network: list[str], fake_subset: Path, tmp_path: Path, monkeypatch
) -> None:
    """Setting BLITZ_CIFAR10_SUBSET means 'use it' (notebook 04's data cell checks just that):
    no download is tried, online or not."""
    monkeypatch.setenv(SUBSET_ENV, str(fake_subset))
    monkeypatch.setenv(CHOICE_ENV, "auto")
    d = load_cifar10(root=tmp_path / "data")
    assert not no_network, "auto with a subset file must not go online"
    assert len(d.train) == 20 and d.source.endswith("from subset.npz")


# --- waits are bounded, failures explained ---------------------------------------------------


@pytest.mark.timeout(60)
def test_a_server_that_never_answers_does_not_hang(tmp_path: Path, monkeypatch) -> None:
    import socket
    import threading

    import torchvision.datasets as tvd

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept_and_stay_silent() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept_and_stay_silent, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    monkeypatch.setattr(tvd.CIFAR10, "url", f"http://127.0.0.1:{port}/cifar-10-python.tar.gz")
    monkeypatch.setattr(data_mod, "DOWNLOAD_TIMEOUT_S", 2.0)
    monkeypatch.delenv(SUBSET_ENV, raising=False)
    try:
        with pytest.raises(CIFAR10Unavailable, match="timed out") as info:
            load_cifar10(root=tmp_path / "data")
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in accepted:
            conn.close()
        server.close()
    assert accepted, "the download never reached the silent server"
    assert "connect to the internet" in str(info.value)
    assert socket.getdefaulttimeout() is None, "the global socket timeout was not restored"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("trickled", ["headers", "body"])
def test_a_server_that_trickles_bytes_is_bounded_in_total(
    trickled: str, tmp_path: Path, monkeypatch
) -> None:
    """A byte every 0.1 s is never 1 s of silence, yet the download ends at its total bound
    (a proxy sending a byte every 20 s kept it going for ever against a 60 s silence bound)."""
    import socket
    import threading
    import time

    import torchvision.datasets as tvd

    head = b"HTTP/1.0 200 OK\r\nContent-Length: 170000000\r\n\r\n"
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def trickle(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)  # the request
            if trickled == "body":
                conn.sendall(head)
            for byte in (head if trickled == "headers" else b"") + b"x" * 10_000:
                if stop.wait(0.1):
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:  # the client gave up
                    return

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            threading.Thread(target=trickle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    monkeypatch.setattr(tvd.CIFAR10, "url", f"http://127.0.0.1:{port}/cifar-10-python.tar.gz")
    monkeypatch.setattr(data_mod, "DOWNLOAD_TIMEOUT_S", 1.0)  # silence: never reached
    monkeypatch.setattr(data_mod, "DOWNLOAD_TOTAL_S", 2.0)
    monkeypatch.delenv(SUBSET_ENV, raising=False)
    start, readinto = time.monotonic(), socket.SocketIO.readinto
    try:
        with pytest.raises(CIFAR10Unavailable) as info:
            load_cifar10(root=tmp_path / "data")
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()
    took = time.monotonic() - start
    msg = str(info.value)
    assert "(TimeoutError: the download took more than 2 s in total" in msg, msg
    assert "connect to the internet" in msg and f"{SUBSET_ENV}=/path/to/" in msg, msg
    assert took < 2.0 + 1.0 + 3.0, f"the 2 s bound ended the download after {took:.1f} s"
    assert socket.getdefaulttimeout() is None, "the global socket timeout was not restored"
    assert socket.SocketIO.readinto is readinto, "socket reads were changed"
    assert not list((tmp_path / "data").glob("*.partial")), "a partial download was left"


def test_an_unreadable_subset_is_a_subset_error(tmp_path: Path, monkeypatch) -> None:
    path = write_npz(tmp_path / "subset.npz")
    path.chmod(0)
    if os.access(path, os.R_OK):  # root reads anything: simulate what chmod 000 does to a learner

        def refuse(*args, **kwargs):
            raise PermissionError(13, "Permission denied", str(path))

        monkeypatch.setattr(data_mod, "open", refuse, raising=False)  # utils.data's open only
    monkeypatch.setenv(SUBSET_ENV, str(path))
    monkeypatch.setenv(CHOICE_ENV, "subset")
    with pytest.raises(
        SubsetError, match=r"cannot read the CIFAR-10 subset at .*PermissionError.*chmod a\+r"
    ):
        load_cifar10()  # fails while computing the checksum


@pytest.fixture(scope="module")
def full_download_md5(full_download: Path) -> dict[str, str]:
    """md5 of each file of the folder above, computed once."""
    import hashlib

    folder = full_download / "cifar-10-batches-py"
    return {f.name: hashlib.md5(f.read_bytes()).hexdigest() for f in folder.iterdir()}


@pytest.fixture
def copy_with_real_md5(
    full_download: Path, full_download_md5: dict[str, str], tmp_path: Path, monkeypatch
) -> Path:
    """A copy of the folder above that torchvision checks with its own md5 code: the
    expected md5s are this folder's, so only a file that is missing or damaged fails."""
    import torchvision.datasets as tvd

    cls = tvd.CIFAR10
    monkeypatch.setattr(cls, "train_list", [[n, full_download_md5[n]] for n, _ in cls.train_list])
    monkeypatch.setattr(cls, "test_list", [[n, full_download_md5[n]] for n, _ in cls.test_list])
    monkeypatch.setattr(cls, "meta", {**cls.meta, "md5": full_download_md5["batches.meta"]})
    root = tmp_path / "data"
    (root / "cifar-10-batches-py").mkdir(parents=True)
    for f in (full_download / "cifar-10-batches-py").iterdir():  # links: no 180 MB copy
        (root / "cifar-10-batches-py" / f.name).symlink_to(f)
    return root


def test_the_complete_copy_passes_torchvisions_md5_check(copy_with_real_md5: Path) -> None:
    # The control for the next test: there, only the damage makes torchvision refuse.
    d = load_cifar10(root=copy_with_real_md5, download=False)
    assert (len(d.train), len(d.test)) == (50_000, 10_000)


@pytest.mark.parametrize(("damage", "download"), [("missing", True), ("truncated", False)])
def test_a_half_downloaded_folder_is_named(
    no_network: list[str], copy_with_real_md5: Path, damage: str, download: bool
) -> None:
    root = copy_with_real_md5
    folder = root / "cifar-10-batches-py"
    batch = folder / "data_batch_3"
    whole = batch.read_bytes()
    batch.unlink()
    if damage == "truncated":
        batch.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(CIFAR10Unavailable) as info:
        load_cifar10(root=root, download=download)
    msg = str(info.value)
    assert f"A partial or damaged copy is at {folder.resolve()}: delete that folder" in msg
    assert f"{SUBSET_ENV}=/path/to/cifar10-subset.npz" in msg  # or use the subset
    assert bool(no_network) == download, "offline, a download is tried only when allowed"


def test_full_choice_offline_names_the_fixes_that_work(
    no_network: list[str], fake_subset: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv(SUBSET_ENV, str(fake_subset))  # set, but full was asked for
    monkeypatch.setenv(CHOICE_ENV, "full")
    with pytest.raises(CIFAR10Unavailable) as info:
        load_cifar10(root=tmp_path / "data")
    msg = str(info.value)
    assert f"the offline subset: not tried, {CHOICE_ENV}=full" in msg
    assert f"set {CHOICE_ENV}=subset and {SUBSET_ENV}=/path/to/cifar10-subset.npz" in msg


def test_stored_outputs_compare_equal_whichever_way_the_subset_arrived(
    offline_full: Path, monkeypatch
) -> None:
    """Notebook 04 prints ``source``; make test must pass with the file or the cut, so
    nbval's sanitizer has to map both sources to one text (tests/nbval_sanitize.cfg)."""
    import re

    from nbval.plugin import get_sanitize_patterns

    cfg = Path(__file__).with_name("nbval_sanitize.cfg").read_text()
    patterns = get_sanitize_patterns(cfg)

    def sanitize(text: str) -> str:
        for regex, replace in patterns:  # as nbval does: in file order
            text = re.sub(regex, replace, text)
        return text

    monkeypatch.setenv(CHOICE_ENV, "subset")
    cut = load_cifar10(root=offline_full).source
    monkeypatch.setenv(SUBSET_ENV, str(REAL_SUBSET))
    from_file = load_cifar10(root=offline_full).source
    assert "from cifar10-subset.npz" in from_file and "cut from the full dataset" in cut
    assert sanitize(cut) == sanitize(from_file), (
        "tests/nbval_sanitize.cfg needs a rule mapping both subset sources to one text"
    )
    assert sanitize(cut).startswith("CIFAR-10 subset: 5,000 training / 1,000 test images")


# --- the folder tools/full_from_subset builds (make test-full-data) ---------------------------


def test_the_folder_built_from_the_subset_is_a_full_cifar10(tmp_path: Path, monkeypatch) -> None:
    """tools/full_from_subset: 50,000 / 10,000 images in torchvision's format, read by
    torchvision's CIFAR10 (md5 skipped for this folder only) wherever a caller points, and
    cutting the subset back out of it gives exactly the subset (so the real images sit where
    the real files have them)."""
    if not REAL_SUBSET.is_file():
        pytest.skip(f"the real subset is not at {REAL_SUBSET}")
    from torchvision.datasets import CIFAR10

    from tools.harness import full_from_subset

    full_from_subset.build(REAL_SUBSET, tmp_path / "full")
    monkeypatch.setenv(data_mod.ROOT_ENV, str(tmp_path / "full"))
    monkeypatch.setenv(CHOICE_ENV, "full")
    monkeypatch.setenv(SUBSET_ENV, str(REAL_SUBSET))  # set, but full was asked for
    full = load_cifar10(root=tmp_path / "elsewhere")
    assert isinstance(full.train, CIFAR10) and (len(full.train), len(full.test)) == (50000, 10000)
    assert full.classes[full.train[0][1]] == "frog" and full.source.startswith("full CIFAR-10")
    monkeypatch.setenv(CHOICE_ENV, "subset")
    monkeypatch.delenv(SUBSET_ENV, raising=False)
    cut = load_cifar10(root="unused")
    assert "cut from the full dataset" in cut.source and len(cut.train) == 5000


def test_write_subset_makes_a_file_that_loads_as_the_subset(
    offline_full: Path, tmp_path: Path, monkeypatch
) -> None:
    """A machine with internet but without the file: the test contract cuts it once."""
    made = data_mod.write_subset(tmp_path / "cut" / "cifar10-subset.npz", root=offline_full)
    assert not list(made.parent.glob("*.partial"))
    monkeypatch.setenv(SUBSET_ENV, str(made))
    monkeypatch.setenv(CHOICE_ENV, "subset")
    d = load_cifar10(root="unused")
    assert d.source.endswith("5,000 training / 1,000 test images, from cifar10-subset.npz")
    arrays = (d.train.data, d.train.targets, d.test.data, d.test.targets)
    assert data_mod._arrays_sha256(*arrays) == data_mod.SUBSET_ARRAYS_SHA256


# --- our own download: nothing patched, md5 checked, extracted safely ------------------------


def _tiny_cifar10(folder: Path) -> dict[str, str]:
    """A torchvision-format cifar-10-batches-py of 2 images per batch: md5 per file name."""
    import pickle

    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {"data": rng.integers(0, 256, (2, 3072), dtype=np.uint8), "labels": [1, 2]}
        (folder / name).write_bytes(pickle.dumps(batch))
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": list(CIFAR10_CLASSES)}))
    return {f.name: hashlib.md5(f.read_bytes()).hexdigest() for f in folder.iterdir()}


def _archive(members: dict[str, Path], path: Path) -> str:
    """A .tar.gz of ``members`` (name in the archive -> file); its md5."""
    import tarfile

    with tarfile.open(path, "w:gz") as tar:
        for name, source in members.items():
            tar.add(source, arcname=name)
    return hashlib.md5(path.read_bytes()).hexdigest()


@pytest.fixture
def answer(monkeypatch: pytest.MonkeyPatch):
    """answer(do_GET): torchvision's CIFAR-10 URL is served from 127.0.0.1 by ``do_GET(handler)``;
    returns the server's base URL."""
    import http.server
    import threading

    import torchvision.datasets as tvd

    servers = []

    def start(do_get) -> str:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                do_get(self)

            def log_message(self, *args) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # shutdown() waits for the loop's next poll: 0.5 s by default, a tenth of that here
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        base = f"http://127.0.0.1:{server.server_address[1]}"
        monkeypatch.setattr(tvd.CIFAR10, "url", f"{base}/cifar-10-python.tar.gz")
        return base

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def serve(answer):
    """serve(bytes): torchvision's CIFAR-10 URL now answers with them, from 127.0.0.1; returns
    what the server saw of the socket module while it answered."""
    import socket

    seen: list[tuple] = []

    def send(handler) -> None:
        seen.append((socket.SocketIO.readinto, socket.getdefaulttimeout()))
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def start(data: bytes) -> list[tuple]:
        nonlocal body
        body = data
        answer(send)
        return seen

    body = b""
    return start


@pytest.mark.timeout(60)
def test_the_download_patches_nothing_and_torchvision_reads_what_it_extracted(
    tmp_path: Path, monkeypatch, serve
) -> None:
    # Rule: no patch of a library's internals at run time, not even while downloading.
    import socket

    import torchvision.datasets as tvd

    md5s = _tiny_cifar10(tmp_path / "src" / "cifar-10-batches-py")
    archive = tmp_path / "src.tar.gz"
    folder = tmp_path / "src" / "cifar-10-batches-py"
    tgz_md5 = _archive({f"cifar-10-batches-py/{n}": folder / n for n in md5s}, archive)
    cls = tvd.CIFAR10
    monkeypatch.setattr(cls, "train_list", [[n, md5s[n]] for n, _ in cls.train_list])
    monkeypatch.setattr(cls, "test_list", [[n, md5s[n]] for n, _ in cls.test_list])
    monkeypatch.setattr(cls, "meta", {**cls.meta, "md5": md5s["batches.meta"]})
    monkeypatch.setattr(cls, "tgz_md5", tgz_md5)
    original = (socket.SocketIO.readinto, socket.getdefaulttimeout())
    seen = serve(archive.read_bytes())
    d = load_cifar10(root=tmp_path / "data")
    assert seen == [original], "socket reads or the default timeout were changed"
    assert (len(d.train), len(d.test)) == (10, 2) and d.train.targets[:2] == [1, 2]
    assert isinstance(d.train, tvd.CIFAR10)
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == [
        "cifar-10-batches-py",
        "cifar-10-python.tar.gz",
    ]
    load_cifar10(root=tmp_path / "data")  # whole now: not downloaded again
    assert len(seen) == 1


@pytest.mark.timeout(60)
def test_a_download_with_another_md5_is_one_line_and_leaves_nothing(tmp_path: Path, serve) -> None:
    # Rule: a damaged download is named in one line, and no half file stays behind.
    serve(b"not the archive at all")
    with pytest.raises(CIFAR10Unavailable) as info:
        load_cifar10(root=tmp_path / "data")
    msg = str(info.value)
    assert "has md5 " in msg and "expected c58f30108f718f92721af3b95e74349a" in msg, msg
    assert "\n" not in msg and info.value.__cause__ is None
    assert list((tmp_path / "data").iterdir()) == []


@pytest.mark.timeout(60)
def test_an_archive_cannot_write_outside_its_folder(tmp_path: Path, monkeypatch, serve) -> None:
    # Rule: a downloaded archive is extracted safely: nothing lands outside the data folder.
    import torchvision.datasets as tvd

    (tmp_path / "payload.txt").write_text("injected")
    archive = tmp_path / "evil.tar.gz"
    md5 = _archive({"../outside.txt": tmp_path / "payload.txt"}, archive)
    monkeypatch.setattr(tvd.CIFAR10, "tgz_md5", md5)
    serve(archive.read_bytes())
    (tmp_path / "data").mkdir()
    with pytest.raises(CIFAR10Unavailable, match="outside"):
        load_cifar10(root=tmp_path / "data")
    assert not (tmp_path / "outside.txt").exists()


def test_a_damaged_archive_copied_into_data_is_named_with_what_to_do(
    no_network: list[str], tmp_path: Path
) -> None:
    # A classroom without internet copies the archive into data/ (DATA.md); a copy cut short
    # is named, with its md5, and kept: never "could not download it", never downloaded over.
    archive = tmp_path / "data" / "cifar-10-python.tar.gz"
    archive.parent.mkdir()
    archive.write_bytes(b"\x1f\x8b" + bytes(100_000))  # the start of a gzip file, then nothing
    with pytest.raises(CIFAR10Unavailable) as info:
        load_cifar10(root=tmp_path / "data")
    msg = str(info.value)
    assert f"the CIFAR-10 archive {archive.resolve()} is damaged or incomplete" in msg, msg
    assert "expected c58f30108f718f92721af3b95e74349a" in msg and "DATA.md" in msg, msg
    assert "could not download" not in msg and "\n" not in msg, msg
    assert no_network == [], "a download was tried over the learner's copy"
    assert archive.read_bytes() == b"\x1f\x8b" + bytes(100_000)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("target", ["ftp://127.0.0.1/cifar-10-python.tar.gz", "{base}/elsewhere"])
def test_a_redirect_to_anything_but_https_is_not_followed(
    tmp_path: Path, answer, target: str
) -> None:
    # Rule: the download follows https:// only; urllib alone would follow ftp:// and http://.
    followed = []

    def do_get(handler) -> None:
        if handler.path == "/elsewhere":
            followed.append(handler.path)
        handler.send_response(302)
        handler.send_header("Location", target.format(base=base))
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    base = answer(do_get)
    with pytest.raises(CIFAR10Unavailable) as info:
        load_cifar10(root=tmp_path / "data")
    msg = str(info.value)
    assert f"redirects to {target.format(base=base)}: only https:// is followed" in msg, msg
    assert followed == [] and "\n" not in msg
    assert list((tmp_path / "data").iterdir()) == []


@pytest.mark.timeout(60)
@pytest.mark.parametrize("says_its_length", [True, False])
def test_a_download_larger_than_the_archive_is_stopped_before_it_is_read_whole(
    tmp_path: Path, monkeypatch, answer, says_its_length: bool
) -> None:
    # Rule: sizes are bounded before memory or disk is spent: 50 MB offered where the archive
    # (here 1 MB) belongs; with a Content-Length nothing is read, without one 1 MB at most.
    monkeypatch.setattr(data_mod, "ARCHIVE_BYTES", 1 << 20)
    sent = []

    def do_get(handler) -> None:
        handler.send_response(200)
        if says_its_length:
            handler.send_header("Content-Length", str(50 << 20))
        handler.end_headers()
        chunk = bytes(1 << 16)
        try:
            for _ in range(800):
                handler.wfile.write(chunk)
                sent.append(len(chunk))
        except OSError:  # the client hung up: what we want
            pass

    answer(do_get)
    with pytest.raises(CIFAR10Unavailable) as info:
        load_cifar10(root=tmp_path / "data")
    msg = str(info.value)
    assert "sends more than the archive's 1,048,576 bytes" in msg, msg
    assert "stopped before reading it whole" in msg and "\n" not in msg
    assert sum(sent) < 30 << 20, f"the server could send {sum(sent):,} bytes"
    assert list((tmp_path / "data").iterdir()) == []


def test_an_empty_data_folder_offline_is_one_line_in_the_script(
    no_network: list[str], tmp_path: Path, monkeypatch
) -> None:
    # Rule: bad input gets one clear line, never a traceback.
    import importlib.util

    from utils import launch

    spec = importlib.util.spec_from_file_location("train_ddp", launch.TRAIN_DDP_SCRIPT)
    train_ddp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train_ddp)
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        train_ddp.main(["--data", "cifar10", "--out-dir", str(tmp_path / "run")])
    msg = str(info.value)
    assert msg.startswith("CIFAR-10 is not available. Tried:") and "\n" not in msg, msg
    assert not (tmp_path / "run").exists()


def test_the_cause_in_a_cifar10_message_is_whole_on_one_line(tmp_path: Path, monkeypatch) -> None:
    # Rule: an error message is whole, and one line.
    import torchvision.datasets as tvd

    reason = "the folder said " + "no " * 100 + "at the very end"

    class Failing:
        def __init__(self, *args, **kwargs) -> None:
            raise RuntimeError(f"{reason}\n(second line)")

    monkeypatch.setattr(tvd, "CIFAR10", Failing)
    with pytest.raises(CIFAR10Unavailable) as info:
        load_cifar10(root=tmp_path, download=False)
    msg = str(info.value)
    assert f"(RuntimeError: {reason} (second line))." in msg and "\n" not in msg, msg
