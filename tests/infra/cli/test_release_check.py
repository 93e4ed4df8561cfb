"""``aiplat release check``: the publisher's folder check without publishing (every tensor against the
architecture's own model), and with ``--stack`` the rollout's fit check with its numbers, on folders
transformers itself wrote; a LoRA adapter folder peft wrote, against a base release published into moto."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import Phi3Config, Phi3ForCausalLM

import trainer.release.check as release_check
from infra.cli.main import main
from tests.infra.ops.test_release_check_adapters import adapter_folder, base_folder
from tests.support.hf_folders import edit_json, expected_here, save_folder
from tests.support.release_keys import release_keys
from trainer.release.publish import publish
from trainer.tools.moto_server import MotoServer

STACK = "prod-hk-infer"


@pytest.fixture(scope="module")
def phi3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(4)
    config = Phi3Config(
        hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=4, vocab_size=300, max_position_embeddings=4096, pad_token_id=0,
    )  # fmt: skip
    return save_folder(Phi3ForCausalLM(config), tmp_path_factory.mktemp("phi3"))


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The architecture's tensors asked in this process (the publisher's own process path is covered by
    tests/trainer/test_publish.py and the first test here)."""
    monkeypatch.setattr(release_check, "expected_tensors", expected_here)


def test_a_complete_folder_is_accepted_by_the_publishers_own_check(phi3: Path, capsys) -> None:
    assert main(["release", "check", "--from", str(phi3)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("accepted by the publisher's check: Phi3ForCausalLM, ")
    assert "2 layers, 4 heads (4 KV), max positions 4096, chat template no" in out


def test_a_missing_tensor_is_refused_by_name(phi3: Path, tmp_path: Path, capsys, in_process: None) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    for p in phi3.iterdir():
        (broken / p.name).write_bytes(p.read_bytes())
    weights = load_file(broken / "model.safetensors")
    save_file(
        {k: v for k, v in weights.items() if k != "model.layers.1.mlp.down_proj.weight"},
        broken / "model.safetensors",
    )
    assert main(["release", "check", "--from", str(broken)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--from: the weights do not match config.json (Phi3ForCausalLM's own model): missing " in err
    assert "'model.layers.1.mlp.down_proj.weight'" in err


def test_with_a_stack_the_fit_check_shows_its_numbers(
    phi3: Path, tmp_path: Path, capsys, in_process: None
) -> None:
    assert main(["release", "check", "--from", str(phi3), "--stack", STACK, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["problems"] == [] and doc["facts"]["architecture"] == "Phi3ForCausalLM"
    pools = {r["pool"] for r in doc["fit"]}
    assert pools and all(r["fits"] for r in doc["fit"])
    # weights per GPU: the folder's parameters in the dtype the GPU runs them in (float32 -> its preferred)
    for r in doc["fit"]:
        assert r["weight_bytes"] == doc["facts"]["parameters"] * (
            2 if r["dtype"] in ("float16", "bfloat16") else 4
        )
    # a folder whose positions are fewer than the stack's max_model_len would never start on it
    short = tmp_path / "short"
    short.mkdir()
    for p in phi3.iterdir():
        (short / p.name).write_bytes(p.read_bytes())
    edit_json(short / "config.json", max_position_embeddings=64, original_max_position_embeddings=64)
    assert main(["release", "check", "--from", str(short), "--stack", STACK]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "is above the release's max positions 64 (vLLM refuses it)" in err
    # --model names the stack's model whose settings apply (default: its only one)
    assert main(["release", "check", "--from", str(phi3), "--stack", STACK, "--model", "gpt2-large"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"--model: gpt2-large: {STACK} serves gpt2-small; fix: name one of them: --model gpt2-small" in err


def test_bfloat16_weights_on_gpus_without_bfloat16_are_warned_about(
    phi3: Path, tmp_path: Path, capsys, in_process: None
) -> None:
    bf16 = tmp_path / "bf16"
    torch.manual_seed(5)
    model = Phi3ForCausalLM(
        Phi3Config(
            hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=4, vocab_size=300, max_position_embeddings=4096, pad_token_id=0,
        )
    ).to(torch.bfloat16)  # fmt: skip
    save_folder(model, bf16)
    assert main(["release", "check", "--from", str(bf16), "--stack", STACK]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "T4 has no bfloat16: the bfloat16 weights run as float16, whose range ends at 65504" in err


def test_an_adapter_folder_is_checked_against_its_base_release(
    moto_s3: MotoServer, tmp_path: Path, capsys, in_process: None
) -> None:
    """The publisher's adapter check against ``--base`` (read from ``--release-root``, signature verified),
    and with ``--stack`` the rollout's adapter check against the model's base and lora settings."""
    moto_s3.client().create_bucket(Bucket="artifacts")
    base = base_folder(tmp_path, 0)
    with release_keys(tmp_path / "keys"):
        version = publish(str(base), "s3://artifacts", "tiny-llama").version
        adapter = str(adapter_folder(base, tmp_path / "adapter"))
        assert main(["release", "check", "--from", adapter]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"--base: not given: {adapter} is a LoRA adapter folder (adapter_config.json)" in err
        check = ["release", "check", "--from", adapter, "--base", f"tiny-llama@{version}"]
        check += ["--release-root", "s3://artifacts"]
        assert main(check) == 0
        out = " ".join(capsys.readouterr().out.split())
        tensors = load_file(Path(adapter) / "adapter_model.safetensors")  # what peft wrote: 2 layers x q, v
        targets = json.loads((Path(adapter) / "adapter_config.json").read_text())["target_modules"]
        assert out == (
            f"accepted by the publisher's adapter check: LoRA rank 4 (alpha 8), 4 modules ({targets}), "
            f"{sum(t.numel() for t in tensors.values()):,} float32 parameters, for base tiny-llama/{version} "
            "(LlamaForCausalLM)"
        )
        # the stack serves another base and no LoRA: both refused, with the fix
        assert main([*check, "--stack", STACK, "--json"]) == 2
        doc = json.loads(capsys.readouterr().out)
        assert doc["adapter"]["base_version"] == version and len(doc["problems"]) == 2
        assert doc["problems"][0].startswith(
            f"--from {adapter} is for base tiny-llama/{version}, but inference.models.gpt2-small.release is "
            "gpt2-small/"
        )
        assert doc["problems"][1] == (
            "inference.models.gpt2-small.lora is not set: vLLM serves adapters only with --enable-lora; add "
            "lora: {max_lora_rank: 8}"
        )
        # a base that is not there: the publisher's refusal
        assert main([*check[:5], "tiny-llama@20261201T000000Z-step9", *check[6:]]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert (
            "--base=tiny-llama@20261201T000000Z-step9: no signed release tiny-llama/20261201T000000Z-step9"
            in err
        )
