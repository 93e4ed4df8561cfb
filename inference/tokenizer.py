"""The trainer's byte-level tokenizer (trainer/tools/make_shards.py): token = byte value, EOT = 256.

A release records the tokenizer its model was trained with (``manifest.json`` -> ``tokenizer``, copied from
the shard index: ``{"tokenizer": "bytes", "vocab_size": 257, "eot_token": 256}``); the server refuses a
release whose tokenizer it cannot encode rather than serving nonsense.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainer.release import ReleaseError

BYTES = "bytes"


@dataclass(frozen=True)
class ByteTokenizer:
    """Bytes 0-255 are tokens 0-255; ``eot`` ends a document. Ids ``>= vocab_size`` are never generated."""

    eot: int = 256
    vocab_size: int = 257

    @classmethod
    def for_release(cls, tokenizer: dict[str, Any] | None, model_vocab: int) -> ByteTokenizer:
        """The tokenizer a release names (``None``: a release from before the field existed, which can
        only be the byte tokenizer); :class:`ReleaseError` if it is another kind or does not fit the model."""
        tok = tokenizer or {"tokenizer": BYTES, "vocab_size": 257, "eot_token": 256}
        if tok.get("tokenizer") != BYTES:
            raise ReleaseError(
                f"tokenizer {tok.get('tokenizer')!r} is not supported by this server ({BYTES} only)"
            )
        vocab, eot = tok.get("vocab_size"), tok.get("eot_token")
        if not (isinstance(vocab, int) and isinstance(eot, int) and 256 <= eot < vocab <= model_vocab):
            raise ReleaseError(
                f"tokenizer vocab_size={vocab!r} eot_token={eot!r} do not fit a byte tokenizer and the "
                f"model's {model_vocab} embeddings"
            )
        return cls(eot=eot, vocab_size=vocab)

    def encode(self, text: str) -> list[int]:
        """``[EOT] + UTF-8 bytes``: documents in the training data follow an EOT, so a prompt is
        generated as the start of a new document (and an empty prompt is still one token)."""
        return [self.eot, *text.encode("utf-8")]

    def decode(self, tokens: list[int]) -> str:
        """UTF-8 text of byte tokens (invalid sequences become U+FFFD, as in make_shards.decode)."""
        return bytes(t for t in tokens if t < 256).decode("utf-8", errors="replace")
