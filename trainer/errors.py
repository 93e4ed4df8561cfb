"""Errors the trainer reports as one line (no traceback); each maps to an exit code in ``exitcodes``."""

from __future__ import annotations

from trainer import exitcodes


class TrainerError(Exception):
    """An expected failure with a one-line message; ``code`` is the process exit code it maps to."""

    code = exitcodes.CRASH


class BadInput(TrainerError):
    """Deterministic user error (config, dataset, checkpoint, permissions): retrying cannot help."""

    code = exitcodes.BAD_INPUT


class StoreUnavailable(TrainerError):
    """A data or checkpoint store did not answer (connection refused, timeouts, 5xx) after retries."""

    code = exitcodes.STORE_UNAVAILABLE


class BlobNotFound(FileNotFoundError):
    """A key/file that does not exist in a store."""


class BlobExists(FileExistsError):
    """A create-only write found the key already there."""
