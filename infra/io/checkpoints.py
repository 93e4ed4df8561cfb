"""A run's last committed checkpoint step, read from the checkpoint store the trainer writes, with the
trainer's own store client and manifest parser (``trainer/storage/blobstore.py``,
``trainer/checkpoint/manifest.py``:
both torch-free). A checkpoint is committed once ``step_N/manifest.json`` is written (last, create-only;
docs/trainer.md "Checkpoints"); its files' hashes are not re-read here (the trainer does that on resume).
"""

from __future__ import annotations

from trainer.checkpoint.manifest import ManifestError, parse_manifest
from trainer.errors import BlobNotFound
from trainer.storage.blobstore import open_blobs
from trainer.storage.hashing import MANIFEST

STEP_PREFIX = "step_"  # trainer/checkpoint/store.py step_dir_name: step_<9 digits>


def last_committed_step(uri: str) -> int | None:
    """The newest step under ``uri`` whose manifest parses; None when there is none yet. Raises
    ``TrainerError`` (``StoreUnavailable``, ``BadInput``) when the store refuses or does not answer."""
    store = open_blobs(uri, max_attempts=2)
    steps = sorted(
        (
            int(d[len(STEP_PREFIX) :])
            for d in store.list_dirs()
            if d.startswith(STEP_PREFIX) and d[len(STEP_PREFIX) :].isdigit()
        ),
        reverse=True,
    )
    for step in steps:
        try:
            parse_manifest(store.read(f"{STEP_PREFIX}{step:09d}/{MANIFEST}"), step)
        except (ManifestError, BlobNotFound):  # not committed (yet), or not ours: the next older one
            continue
        return step
    return None
