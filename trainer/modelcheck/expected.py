"""The tensors a Hugging Face folder must hold, from the architecture's own definition: the pinned
transformers' model class named by ``config.json``, built on the meta device (no weights, no memory, no
download), its ``state_dict`` names, shapes and dtypes, and which of them are one tied parameter.

    python -m trainer.modelcheck.expected CONFIG_JSON     # one JSON object on stdout

It runs in a process of its own (``trainer.release.architecture.expected_tensors``): the release publisher
(trainer/release/) imports no torch and no transformers, so nothing that could unpickle is ever loaded beside
its signing key; this process reads one ``config.json`` (data: ``auto_map`` was refused before, so no code of
the folder runs).
Exit 0 with the object; 2 when transformers cannot build the architecture from that config (one line).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from trainer.release.architecture import ExpectedError


def describe(config_json: Path) -> dict[str, Any]:
    """``{"architecture", "dtype", "tensors": {name: {"shape", "dtype"}}, "optional": [...], "fp32": [...]}``
    of the model ``config_json`` describes, named as ``save_pretrained`` writes them (``optional``: tied
    copies it leaves out); in this process: torch and transformers imported."""
    import torch
    import transformers

    raw = json.loads(config_json.read_text())
    arch = raw["architectures"][0]
    cls = getattr(transformers, arch, None)
    if cls is None or not isinstance(cls, type):
        raise ExpectedError(f"transformers {transformers.__version__} has no model class {arch!r}")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(raw))
        try:
            config = transformers.AutoConfig.from_pretrained(tmp, trust_remote_code=False)
        except Exception as exc:  # noqa: BLE001 (a config transformers refuses, whatever the exception)
            raise ExpectedError(" ".join(str(exc).split())[:300]) from None
    dtype_name = str(raw.get("dtype") or raw.get("torch_dtype") or "float32")
    dtype = getattr(torch, dtype_name, None)
    if not isinstance(dtype, torch.dtype):
        raise ExpectedError(f"config.json: dtype {dtype_name!r} is not a torch dtype")
    try:
        with torch.device("meta"):
            model = cls(config)
        model.to(dtype)
    except Exception as exc:  # noqa: BLE001 (any refusal of the config by the model's constructor)
        raise ExpectedError(
            f"{arch} cannot be built from config.json: {' '.join(str(exc).split())[:300]}"
        ) from None
    # the names and shapes save_pretrained writes (transformers 5.23.0 modeling_utils.py save_pretrained):
    # keys it ignores dropped, tied copies removed, its weight conversions reverted to the checkpoint format
    # vLLM loads (e.g. GPT-NeoX's lm_head is embed_out on disk)
    from transformers.core_model_loading import revert_weight_conversion
    from transformers.modeling_utils import remove_tied_weights_from_state_dict

    state = model.state_dict()
    for key in getattr(model, "_keys_to_ignore_on_save", None) or []:
        state.pop(key, None)
    every = revert_weight_conversion(model, dict(state))
    saved = revert_weight_conversion(model, remove_tied_weights_from_state_dict(dict(state), model))
    tensors = {
        name: {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch.")}
        for name, t in every.items()
    }
    optional = sorted(set(every) - set(saved))  # a tied copy: one name of the parameter suffices
    keep = list(getattr(model, "_keep_in_fp32_modules", None) or [])
    fp32 = sorted(n for n in tensors if any(part in n.split(".") for part in keep))
    return {"architecture": arch, "dtype": dtype_name, "tensors": tensors, "optional": optional, "fp32": fp32}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m trainer.modelcheck.expected CONFIG_JSON", file=sys.stderr)
        return 2
    try:
        out = describe(Path(args[0]))
    except ExpectedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
