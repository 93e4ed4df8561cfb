"""The inference API keys' one source: the environment's train stack holds them as a secret and exports
them as a secret; the infer stacks of a global endpoint read that output through their StackReference
(so both regions accept the same keys); a stack file never holds them in plain text."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
import yaml

from infra.context import StackContext
from infra.core.errors import ConfigErrors
from infra.edge.config import API_KEYS_KEY
from infra.edge.wire import API_KEYS_OUTPUT, api_keys_for
from infra.io.stackfiles import load_stack_config
from infra.plan.mocks import AwsSnapshotMocks
from infra.plan.runner import SECRET, run_program
from infra.storage.wire import StorageWiring


def test_the_train_stack_exports_its_keys_as_a_secret(plan_stack) -> None:
    outputs = plan_stack("prod-us-train").outputs
    assert outputs[API_KEYS_OUTPUT] == SECRET  # present, and masked in the plan like every secret


@pytest.mark.parametrize("stack", ["prod-hk-infer", "prod-sg-infer"])
def test_infer_stacks_of_the_global_endpoint_read_the_train_stack_s_keys(stack) -> None:
    cfg = load_stack_config(stack)
    source = cfg.storage.source_stack
    seen: dict[str, Any] = {}

    def program() -> None:
        ctx = StackContext(cfg=cfg, facts=None, account=None, provider=None)  # type: ignore[arg-type]
        storage = StorageWiring(source=pulumi.StackReference(f"organization/aiplat/{source}"))
        keys = api_keys_for(ctx, storage)
        assert keys is not None
        keys.apply(lambda v: seen.setdefault("keys", v))
        pulumi.export("keys", keys)

    monitor = run_program(
        program,
        stack=stack,
        mocks=AwsSnapshotMocks(cfg.region, stack_outputs={source: {API_KEYS_OUTPUT: ["k1", "k2"]}}),
    )
    assert seen == {"keys": ["k1", "k2"]}
    assert monitor.stack_outputs["keys"] == SECRET  # and it stays a secret


def test_api_keys_in_plain_text_are_refused(stack_doc, write_stack) -> None:
    doc = stack_doc("prod-us-train")
    doc["config"][API_KEYS_KEY] = ["sk-live-1", "sk-live-2"]
    folder = write_stack("prod-us-train", doc)
    with pytest.raises(ConfigErrors) as info:
        load_stack_config("prod-us-train", folder)
    assert (
        f"{API_KEYS_KEY}: API keys in plain text; fix: remove them and run `pulumi config set --secret"
        in str(info.value)
    )
    doc["config"][API_KEYS_KEY] = {"secure": "v1:ciphertext"}
    (folder / "Pulumi.prod-us-train.yaml").write_text(yaml.safe_dump(doc))
    assert load_stack_config("prod-us-train", folder).role.value == "train"
