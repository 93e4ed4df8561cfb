"""The policy pack on the FSx for Lustre example: it passes as planned, and the pack's encryption rule does
look at the file system (a plan without the customer managed key, or with a scratch type, fails on it)."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from infra.plan.runner import run_plan
from infra.review import review_plan
from tests.conftest import EXAMPLES_DIR

FS = "aws:fsx/lustreFileSystem:LustreFileSystem"


@pytest.fixture(scope="module")
def planned() -> dict:
    return run_plan("fsx", stacks_dir=EXAMPLES_DIR).as_json()


def _edit_fs(doc: dict, edit: Callable[[dict], None]) -> dict:
    doc = copy.deepcopy(doc)
    (fs,) = [r for r in doc["resources"] if r["type"] == FS]
    edit(fs["inputs"])
    return doc


def test_example_passes_the_pack(planned) -> None:
    review = review_plan(planned)
    assert review.mandatory == [] and review.advisory == []
    assert any(r["type"] == FS for r in planned["resources"])


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda i: i.pop("kmsKeyId"), "no customer managed key (kms_key_id unset: the FSx default key)"),
        (lambda i: i.update(deploymentType="SCRATCH_2"), "deployment type SCRATCH_2 is encrypted with"),
    ],
    ids=["no-key", "scratch"],
)
def test_the_encryption_rule_sees_the_file_system(planned, edit, message) -> None:
    review = review_plan(_edit_fs(planned, edit))
    found = [d for d in review.mandatory if d.policy == "fsx-cmk-encryption"]
    assert [d.resource for d in found] == ["LustreFileSystem fsx-fs"], review.mandatory
    assert message in found[0].message


def test_every_taggable_type_of_the_example_is_listed(planned) -> None:
    from aiplat_policies import tags

    from tests.policies.test_pack import _sdk_takes_tags

    seen = {r["type"] for r in planned["resources"] if r["type"].startswith("aws:")}
    assert "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation" in seen
    assert {t for t in seen if _sdk_takes_tags(t)} <= tags.TAGGABLE
