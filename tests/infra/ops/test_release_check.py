"""The rollout's release check (infra/ops/release_check.py): before an infer stack's update, the release it
names is read from the region's replica bucket (a real signed release, published with trainer.release.publish
over
moto), and refused with the numbers when its weights and one sequence's KV cache do not fit the pool's GPUs,
when tensor parallelism does not divide its heads, when max_model_len exceeds it, or when chat is routed to
a release without a chat template; a refusal stops the rollout before anything changes."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from infra.io.releases import ReleaseFacts
from infra.io.stackfiles import load_stack_config
from infra.ops.release_check import AwsReleaseCheck, fit_check, fit_problems
from infra.ops.rollout import State, run_rollout
from infra.schema.platform import PlatformConfig
from tests.infra.ops.test_rollout import FakeGate, FakeRunner
from tests.support.hf_folders import CHAT_TEMPLATE, save_folder
from tests.support.release_keys import release_keys
from trainer.release.publish import publish
from trainer.tools.moto_server import MotoServer

HK = load_stack_config("prod-hk-infer")  # pool gpu: Karpenter, families g6, g5, g4dn
M = "gpt2-small"  # its one model
# A Llama-3-8B-shaped release (meta-llama/Meta-Llama-3-8B config.json: 32 layers, 32 heads, 8 KV heads of
# 128, 8192 positions; 8,030,261,248 parameters in bfloat16).
LLAMA_8B = ReleaseFacts(
    version="20261201T000000Z-step0",
    architecture="LlamaForCausalLM",
    model_type="llama",
    dtype="bfloat16",
    parameters=8_030_261_248,
    weight_bytes=2 * 8_030_261_248,
    layers=32,
    attention_heads=32,
    kv_heads=8,
    head_dim=128,
    max_positions=8192,
    chat_template=True,
)


def _model(cfg: PlatformConfig, **changes: Any) -> PlatformConfig:
    """``cfg`` with model M's section changed."""
    assert cfg.inference is not None
    model = cfg.inference.models[M].model_copy(update=changes)
    models = {**cfg.inference.models, M: model}
    return cfg.model_copy(update={"inference": cfg.inference.model_copy(update={"models": models})})


def engine(cfg: PlatformConfig, **changes: Any) -> PlatformConfig:
    assert cfg.inference is not None
    return _model(cfg, engine=cfg.inference.models[M].engine.model_copy(update=changes))


def test_an_8b_model_does_not_fit_a_t4_and_the_refusal_has_the_numbers() -> None:
    (problem,) = fit_problems(HK, M, LLAMA_8B)
    # The pool mixes T4 with bfloat16 GPUs: float16 everywhere (2 bytes); the smallest GPU is g4dn's T4.
    assert problem.startswith(
        "release 20261201T000000Z-step0 (LlamaForCausalLM, 8,030,261,248 parameters, 14.96 GiB of bfloat16 "
        "weights) does not fit pool 'gpu''s g4dn.xlarge (T4, 16.00 GiB per GPU): weights 14.96 GiB in "
        "float16 over 1 GPU(s) + KV cache 0.12 GiB for one 1024-token sequence = 15.08 GiB per GPU, above "
        "16.00 GiB x gpu_memory_utilization 0.9 = 14.40 GiB"
    ), problem
    # Two GPUs per pod halve the weights (the pool's 4-GPU g4dn.12xlarge is the smallest that holds a pod).
    assert fit_problems(engine(HK, gpus_per_pod=2), M, LLAMA_8B) == []
    # A longer context grows the KV cache: 8192 tokens x 32 layers x 4 KV heads per GPU (8 over 2) x 128 x 2
    # (K and V) x 2 bytes = 0.50 GiB.
    longer = engine(HK, gpus_per_pod=2, max_model_len=8192, gpu_memory_utilization=0.45)
    (problem,) = fit_problems(longer, M, LLAMA_8B)
    assert (
        "g4dn.12xlarge (T4, 16.00 GiB per GPU): weights 7.48 GiB in float16 over 2 GPU(s) + KV cache "
        "0.50 GiB for one 8192-token sequence = 7.98 GiB per GPU, above 16.00 GiB x gpu_memory_utilization "
        "0.45 = 7.20 GiB"
    ) in problem


def test_tensor_parallelism_context_and_chat_are_checked_against_the_release() -> None:
    problems = fit_problems(engine(HK, gpus_per_pod=3, max_model_len=16384, serve_chat=True), M,
                            dataclasses.replace(LLAMA_8B, chat_template=False))  # fmt: skip
    field = f"inference.models.{M}.engine"
    assert problems[0].startswith(f"{field}.gpus_per_pod 3: vLLM splits the release's 32 attention")
    assert problems[1].startswith(f"{field}.max_model_len 16384 is above the release's max positions")
    assert problems[2].startswith(f"{field}.serve_chat is true but release 20261201T000000Z-step0 has")
    ok = fit_check(engine(HK, gpus_per_pod=4, serve_chat=True), M, LLAMA_8B)
    assert ok.ok and "fits 4 GPU(s) per pod at max_model_len 1024, chat template present" in ok.detail


def with_version(cfg: PlatformConfig, version: str) -> PlatformConfig:
    assert cfg.inference is not None
    return _model(cfg, release=cfg.inference.models[M].release.model_copy(update={"version": version}))


def release_check(moto: MotoServer, bucket: str | None, pem: str) -> AwsReleaseCheck:
    """The production check on moto, the train stack's outputs naming ``bucket`` as the HK replica."""
    outputs = (
        {"artifactReplicas": {"ap-east-1": {"bucket": bucket}}, "releaseSigningPublicKey": pem}
        if bucket
        else {}
    )
    return AwsReleaseCheck(lambda service, region: moto.client(service, region), lambda stack: outputs)


@pytest.fixture()
def published(moto_s3: MotoServer, tmp_path: Path) -> tuple[MotoServer, str, str]:
    """A Llama release with a chat template, published into the HK replica bucket; (server, version, pem)."""
    s3 = moto_s3.client()
    s3.create_bucket(Bucket="hk-replica")
    torch.manual_seed(0)
    small = LlamaConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, vocab_size=300, max_position_embeddings=2048)  # fmt: skip
    folder = save_folder(LlamaForCausalLM(small), tmp_path / "model", chat_template=CHAT_TEMPLATE)
    assert HK.inference is not None
    with release_keys(tmp_path / "keys") as (_, public):
        rel = publish(str(folder), "s3://hk-replica", HK.inference.models[M].release.name)
    return moto_s3, rel.version, public.read_text()


def test_the_check_reads_the_signed_release_of_the_region(
    published: tuple[MotoServer, str, str], tmp_path: Path
) -> None:
    moto, version, pem = published
    cfg = with_version(HK, version)
    check = release_check(moto, "hk-replica", pem)
    got = check.check("prod-hk-infer", cfg)
    assert got is not None and got.ok, got
    assert got.detail.startswith(f"{M}: release {version} (LlamaForCausalLM, float32, ")
    # Chat routed: the release has a template, so that passes; max_model_len above its 2048 positions not.
    got = check.check("prod-hk-infer", engine(cfg, serve_chat=True, max_model_len=4096))
    assert got is not None and not got.ok
    assert got.detail.startswith(
        f"{M}: inference.models.{M}.engine.max_model_len 4096 is above the release's max positions 2048"
    )
    # A version the region does not hold, and a manifest signed by another key, are refused.
    assert HK.inference is not None
    got = check.check("prod-hk-infer", HK)
    assert got is not None and not got.ok
    assert got.detail.startswith(
        f"inference.models.{M}.release.version {HK.inference.models[M].release.version} is not under "
        "s3://hk-replica/release/"
    )
    with release_keys(tmp_path / "other") as (_, other):
        got = release_check(moto, "hk-replica", other.read_text()).check("prod-hk-infer", cfg)
    assert got is not None and not got.ok and "signature does not verify" in got.detail
    # No release at all (a new platform), or no train stack deployed yet: nothing to check.
    moto.client().create_bucket(Bucket="empty-replica")
    got = release_check(moto, "empty-replica", pem).check("prod-hk-infer", cfg)
    assert got is not None and got.ok and got.detail.startswith(f"{M}: no model release yet under")
    got = release_check(moto, None, pem).check("prod-hk-infer", cfg)
    assert got is not None and got.ok and got.detail.startswith("not checked:")
    assert check.check("prod-us-train", load_stack_config("prod-us-train")) is None


class RefuseHk:
    def __init__(self) -> None:
        self.checked: list[str] = []

    def check(self, stack: str, cfg: PlatformConfig) -> Any:
        from infra.ops.rollout import GateCheck

        self.checked.append(stack)
        if stack == "prod-hk-infer":
            return GateCheck("release-fit", False, "does not fit pool 'gpu'")
        return None


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_refused_release_stops_before_the_update(dry_run: bool) -> None:
    from tests.infra.ops.test_rollout import CONFIGS, PROD

    runner, gate, releases = FakeRunner(), FakeGate(), RefuseHk()
    result = run_rollout(PROD, CONFIGS, runner, gate, dry_run=dry_run, release_check=releases)
    hk = result.results["prod-hk-infer"]
    assert hk.state is State.release_refused and hk.release is not None and not hk.release.ok
    assert ("up", "prod-hk-infer") not in runner.calls and "prod-hk-infer" not in gate.checked
    assert not result.ok and result.stopped_at == hk.wave
