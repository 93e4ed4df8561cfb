"""The rollout's release check of LoRA adapters (infra/ops/release_check.py): every adapter of a model is read
from its signed manifest in the region's replica bucket (a tiny Llama base and a peft adapter published with
trainer.release.publish over moto, as tests/trainer/release/test_adapter_release.py does) and refused, with
the fix, when it is no adapter, was published for another base release (name, version, or the base
manifest's sha256), or has a rank above the model's lora.max_lora_rank."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import torch
from peft import LoraConfig as PeftLora
from peft import get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM

from infra.inference.config import LATEST, AdapterConfig, LoraConfig, ModelConfig
from infra.io.releases import read_adapter, read_release
from infra.io.stackfiles import load_stack_config
from infra.ops.release_check import AwsReleaseCheck, adapter_problems
from infra.schema.platform import PlatformConfig
from tests.support.hf_folders import save_folder
from tests.support.release_keys import release_keys
from trainer.release.publish import publish
from trainer.tools.moto_server import MotoServer

HK = load_stack_config("prod-hk-infer")  # its one model: gpt2-small
M = "gpt2-small"
assert HK.inference is not None
BASE = HK.inference.models[M].release.name
ADAPTER, FOREIGN = "llama-support", "llama-foreign"
REPLICA = "hk-replica"
SMALL = LlamaConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, vocab_size=300, max_position_embeddings=2048)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Published:
    moto: MotoServer
    pem: str
    v1: str  # base versions in the replica
    v2: str
    adapter: str  # ADAPTER's version, published for BASE@v1 of the replica
    foreign: str  # FOREIGN's version, published for another store's BASE@v1


def base_folder(tmp: Path, seed: int) -> Path:
    torch.manual_seed(seed)
    return save_folder(LlamaForCausalLM(SMALL), tmp / f"base-{seed}")


def adapter_folder(base: Path, dest: Path, rank: int = 4) -> Path:
    model = get_peft_model(LlamaForCausalLM.from_pretrained(base), PeftLora(
        r=rank, lora_alpha=2 * rank, task_type="CAUSAL_LM", target_modules=["q_proj", "v_proj"]))  # fmt: skip
    model.save_pretrained(dest)  # adapter_config.json, adapter_model.safetensors
    return dest


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Published]:
    """Two base versions and an adapter for the first in the HK replica; a second store whose base has the
    first's version but other weights, and an adapter published there, then copied into the replica."""
    tmp = tmp_path_factory.mktemp("adapters")
    t1, t2 = datetime(2026, 12, 1, 10, tzinfo=UTC), datetime(2026, 12, 2, 10, tzinfo=UTC)
    with MotoServer() as moto, pytest.MonkeyPatch.context() as mp, release_keys(tmp / "keys") as (_, pub):
        for k, v in moto.env().items():
            mp.setenv(k, v)
        moto.reset()
        s3 = moto.client()
        for b in (REPLICA, "other"):
            s3.create_bucket(Bucket=b)
        base, other = base_folder(tmp, 0), base_folder(tmp, 1)
        v1 = publish(str(base), f"s3://{REPLICA}", BASE, now=t1).version
        v2 = publish(str(base), f"s3://{REPLICA}", BASE, now=t2).version
        adapter = publish(str(adapter_folder(base, tmp / "adapter")), f"s3://{REPLICA}", ADAPTER,
                          base=f"{BASE}@{v1}").version  # fmt: skip
        assert publish(str(other), "s3://other", BASE, now=t1).version == v1
        foreign = publish(str(adapter_folder(other, tmp / "foreign")), "s3://other", FOREIGN,
                          base=f"{BASE}@{v1}").version  # fmt: skip
        for o in s3.list_objects_v2(Bucket="other", Prefix=f"release/{FOREIGN}/")["Contents"]:
            body = s3.get_object(Bucket="other", Key=o["Key"])["Body"].read()
            s3.put_object(Bucket=REPLICA, Key=o["Key"], Body=body)
        yield Published(moto, pub.read_text(), v1, v2, adapter, foreign)


def serving(
    base_version: str, adapters: dict[str, tuple[str, str]], max_lora_rank: int = 8
) -> PlatformConfig:
    """HK with model M serving ``BASE@base_version`` and ``adapters`` (served name -> (release, version))."""
    assert HK.inference is not None
    model = HK.inference.models[M]
    release = model.release.model_copy(update={"version": base_version, "allow_latest": True})
    model = model.model_copy(update={
        "release": release,
        "lora": LoraConfig(max_lora_rank=max_lora_rank),
        "adapters": {k: AdapterConfig(release=ModelConfig(name=n, version=v, allow_latest=True))
                     for k, (n, v) in adapters.items()},
    })  # fmt: skip
    inference = HK.inference.model_copy(update={"models": {M: model}})
    return HK.model_copy(update={"inference": inference})


def test_adapters_are_judged_against_the_base_the_model_serves(published: Published) -> None:
    p, s3 = published, published.moto.client()
    base1 = read_release(s3, REPLICA, BASE, p.v1, p.pem)
    base2 = read_release(s3, REPLICA, BASE, p.v2, p.pem)
    adapter = read_adapter(s3, REPLICA, ADAPTER, p.adapter, p.pem)
    label = f"inference.models.{M}.adapters.support.release"

    def judge(cfg: PlatformConfig, facts: Any, base: Any) -> tuple[list[str], list[str]]:
        return adapter_problems(cfg, M, label, facts, base)

    # The base it was published for, its manifest's sha256 as the adapter recorded it, rank 4 <= 8: served.
    assert (adapter.base_name, adapter.base_version, adapter.rank) == (BASE, p.v1, 4)
    assert judge(serving(p.v1, {}), adapter, base1) == ([], [])
    # The model serves the base's next version: the adapter's matrices were trained on other weights.
    (problem,), _ = judge(serving(p.v2, {}), adapter, base2)
    assert problem == (
        f"{label} {p.adapter} is for base {BASE}/{p.v1}, but inference.models.{M}.release is "
        f"{BASE}/{p.v2}: its A and B matrices were trained on other weights (the fetch tool refuses the "
        f"pair); serve it on the model that serves {BASE}/{p.v1}, or publish the adapter again with --base "
        f"{BASE}@{p.v2}"
    )
    # latest: judged against what it resolves to now, and said what cannot be checked
    (problem,), _ = judge(serving(LATEST, {}), adapter, base2)
    assert f"release.version latest resolves to {p.v2} now (the fetch tool refuses the pair)" in problem
    assert judge(serving(LATEST, {}), adapter, base1) == ([], [
        f"inference.models.{M}.release.version latest is {BASE}/{p.v1} now; a base published before the pods "
        "start would not match"])  # fmt: skip
    problems, (caveat,) = judge(serving(LATEST, {}), adapter, None)
    assert problems == [] and "no base release was read: whether the pods' base is" in caveat
    # An adapter published against another store's base of the same name and version: the sha256 differs.
    foreign = read_adapter(s3, REPLICA, FOREIGN, p.foreign, p.pem)
    (problem,), _ = judge(serving(p.v1, {}), foreign, base1)
    assert problem.startswith(
        f"{label} {p.foreign} recorded base {BASE}/{p.v1}'s manifest sha256 "
        f"{foreign.base_manifest_sha256[:12]}..., the region's {BASE}/{p.v1} has {base1.manifest_sha256[:12]}"
    )
    assert foreign.base_manifest_sha256 != base1.manifest_sha256
    # A rank above max_lora_rank: vLLM refuses to load it; the fix names the smallest rank that serves it.
    (problem,), _ = judge(serving(p.v1, {}, max_lora_rank=1), adapter, base1)
    assert problem == (
        f"{label} {p.adapter} has rank 4, above inference.models.{M}.lora.max_lora_rank 1: vLLM refuses to "
        "load it (vllm/lora/peft_helper.py validate_legal); raise max_lora_rank to 8"
    )
    # A model release named as an adapter.
    (problem,), _ = judge(serving(p.v1, {}), read_adapter(s3, REPLICA, BASE, p.v1, p.pem), base1)
    assert problem.startswith(f"{label} {p.v1} is a model release, not a LoRA adapter")


def test_the_rollouts_check_reads_every_adapter_of_the_region(published: Published) -> None:
    p = published
    outputs = {"artifactReplicas": {"ap-east-1": {"bucket": REPLICA}}, "releaseSigningPublicKey": p.pem}
    check = AwsReleaseCheck(lambda service, region: p.moto.client(service, region), lambda stack: outputs)
    got = check.check("prod-hk-infer", serving(p.v1, {"support": (ADAPTER, p.adapter)}))
    assert got is not None and got.ok, got
    assert f"{M}/support: LoRA adapter {p.adapter} (rank 4) on base {BASE}/{p.v1}" in got.detail
    # Every adapter judged, each refusal in the one verdict; the base's own check still passes.
    got = check.check("prod-hk-infer", serving(p.v1, {
        "support": (ADAPTER, LATEST), "foreign": (FOREIGN, p.foreign), "base": (BASE, p.v1),
        "missing": (ADAPTER, "20261203T000000Z-step0")}))  # fmt: skip
    assert got is not None and not got.ok
    field = f"inference.models.{M}.adapters"
    details = re.split(f"; (?={M}[:/])", got.detail)  # each check's detail starts with its model
    assert details[0].startswith(f"{M}: release {p.v1} (LlamaForCausalLM, float32, ")
    assert details[1] == f"{M}/support: LoRA adapter {p.adapter} (rank 4) on base {BASE}/{p.v1}"
    assert details[2].startswith(f"{M}/foreign: {field}.foreign.release {p.foreign} recorded base "
                                 f"{BASE}/{p.v1}'s manifest sha256 ")  # fmt: skip
    assert details[3].startswith(f"{M}/base: {field}.base.release {p.v1} is a model release, not a LoRA")
    assert details[4] == (
        f"{M}/missing: {field}.missing.release.version 20261203T000000Z-step0 is not under "
        f"s3://{REPLICA}/release/{ADAPTER}/ (newest there: {p.adapter}): the pods' adapter fetch would fail; "
        "publish it, fix the version or wait for replication"
    )
    # The model moved on to the next base version: its adapter, published for the first, is refused.
    got = check.check("prod-hk-infer", serving(p.v2, {"support": (ADAPTER, p.adapter)}))
    assert got is not None and not got.ok
    assert f"{M}/support: {field}.support.release {p.adapter} is for base {BASE}/{p.v1}, " in got.detail
    # An adapter release served as the base model is refused as no model.
    got = check.check(
        "prod-hk-infer", serving(p.v1, {}).model_copy(update={"inference": _base_named(ADAPTER, p)})
    )
    assert got is not None and not got.ok
    assert f"{M}: release {p.adapter} under s3://{REPLICA}/release/{ADAPTER}/: a LoRA adapter release (for " \
           f"base {BASE}/{p.v1}), not a model" in got.detail  # fmt: skip


def _base_named(name: str, p: Published) -> Any:
    cfg = serving(p.v1, {})
    assert cfg.inference is not None
    model = cfg.inference.models[M]
    model = model.model_copy(
        update={"release": model.release.model_copy(update={"name": name, "version": p.adapter})}
    )
    return cfg.inference.model_copy(update={"models": {M: model}})
