"""Hugging Face model folders for the release tests, written by transformers itself (``save_pretrained``), and
the publisher's folder check run on a local one."""

from __future__ import annotations

import functools
import json
import tempfile
from pathlib import Path
from typing import Any

from trainer.export.gpt2 import ByteVocab, tokenizer_json
from trainer.modelcheck.expected import describe
from trainer.release.architecture import ExpectedError
from trainer.release.hf_folder import Serving, check_folder, plan_folder, read_header

CHAT_TEMPLATE = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}<|assistant|>"


def save_folder(model: Any, dest: Path, *, chat_template: str | None = None, **save: Any) -> Path:
    """``model.save_pretrained(dest)`` (safetensors) plus a byte-level tokenizer (trainer/export/gpt2.py's)
    and,
    with ``chat_template``, a tokenizer_config.json that has one."""
    model.save_pretrained(dest, **save)
    (dest / "tokenizer.json").write_text(json.dumps(tokenizer_json(ByteVocab())))
    tok: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>"}
    if chat_template is not None:
        tok["chat_template"] = chat_template
    (dest / "tokenizer_config.json").write_text(json.dumps(tok))
    return dest


@functools.cache
def _described(config: bytes) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_bytes(config)
        return json.dumps(describe(Path(tmp) / "config.json"))


def expected_here(config: bytes) -> dict[str, Any]:
    """``trainer.release.architecture.expected_tensors`` in this process (the test environment imports torch
    anyway; the publisher's own process path is tests/trainer/test_publish.py's), once per config."""
    try:
        return dict(json.loads(_described(config)))
    except ExpectedError:
        raise
    except Exception as exc:  # what the child process would print and exit 2 with
        raise ExpectedError(" ".join(str(exc).split())[:300]) from None


def check_local(folder: Path, *, full: bool = True) -> Serving:
    """What the publisher decides about a local folder: the files by name, then their JSON and headers, then
    (``full``) the tensors against the architecture's own model; ``full=False``: what a reader checks."""
    listing = {p.relative_to(folder).as_posix(): p.stat().st_size for p in folder.rglob("*") if p.is_file()}
    plan = plan_folder(listing)

    def head(name: str) -> bytes:
        with open(folder / name, "rb") as f:
            return read_header(f, name, listing[name])

    return check_folder(
        plan.publish,
        listing,
        lambda n: (folder / n).read_bytes(),
        head,
        expected=expected_here if full else None,
    )


def edit_json(path: Path, **changes: Any) -> None:
    """Set (or with ``None``, remove) keys of a JSON object file."""
    data = json.loads(path.read_text())
    for k, v in changes.items():
        if v is None:
            data.pop(k, None)
        else:
            data[k] = v
    path.write_text(json.dumps(data))
