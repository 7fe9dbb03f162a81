"""A 50,000 / 10,000-image CIFAR-10 folder in torchvision's format, built from the subset.

The full download is out of reach here, yet notebooks 04 and 05 must run on the full
dataset's size (``.ci/run`` proves it). The subset's 6,000 real images go where they sit in
the real files (the first 1,000 rows of each training batch and of the test batch); every
other row repeats one of them. torchvision's md5 check cannot pass on these files, so the
folder carries ``utils.data.BUILT_FROM_SUBSET`` and ``utils.load_cifar10`` skips the check
there. Never commit the result (it is derived from the subset, which stays out of git).

    python -m tools.harness.full_from_subset /tmp/cifar10-full   # then, for the notebooks:
    BLITZ_CIFAR10=full BLITZ_CIFAR10_ROOT=/tmp/cifar10-full python -m
    tools.authoring.run_notebooks ...
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
from pathlib import Path

import numpy as np

from utils import data

BATCH = data.FULL_BATCH


def _batch(images: np.ndarray, labels: np.ndarray, name: str, size: int = BATCH) -> dict:
    """One torchvision batch file's dict: ``size`` rows, the given images first, then repeats."""
    rows = np.arange(size) % len(images)
    flat = images[rows].transpose(0, 3, 1, 2).reshape(size, -1)  # HWC -> CHW planes, as stored
    return {
        "batch_label": name,
        "labels": [int(v) for v in labels[rows]],
        "data": np.ascontiguousarray(flat, dtype=np.uint8),
        "filenames": [f"{name}_{i:05d}.png" for i in range(size)],
    }


def build(subset: Path, out: Path, size: int = BATCH) -> Path:
    """Write ``out/cifar-10-batches-py``: six batch files of ``size`` rows each (10,000, the
    full dataset's; ``data.PER_BATCH``, the subset's images alone) and the class names."""
    with np.load(subset, allow_pickle=False) as npz:
        x_train, y_train = npz["x_train"], npz["y_train"]
        x_test, y_test, classes = npz["x_test"], npz["y_test"], npz["classes"]
    folder = out / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    per = data.PER_BATCH
    for b in range(5):
        part = slice(b * per, (b + 1) * per)
        batch = _batch(x_train[part], y_train[part], f"data_batch_{b + 1}", size)
        (folder / f"data_batch_{b + 1}").write_bytes(pickle.dumps(batch))
    (folder / "test_batch").write_bytes(pickle.dumps(_batch(x_test, y_test, "test_batch", size)))
    meta = {"label_names": [str(c) for c in classes], "num_cases_per_batch": size}
    (folder / "batches.meta").write_bytes(pickle.dumps(meta))
    (folder / data.BUILT_FROM_SUBSET).write_text(
        f"Built from {subset.name} by tools/harness/full_from_subset.py: "
        "6,000 real images, repeated.\n"
    )
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder to create cifar-10-batches-py in")
    parser.add_argument("--subset", type=Path, default=os.environ.get(data.SUBSET_ENV))
    args = parser.parse_args(argv)
    if args.subset is None or not args.subset.is_file():
        sys.exit(f"full_from_subset: no subset file: pass --subset or set {data.SUBSET_ENV}")
    print(f"wrote {build(args.subset, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
