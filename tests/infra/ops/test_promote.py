"""Which infer stacks serve a model, the one line of each stack file a promote changes, and the version a
rollback returns to (infra/ops/promote.py, infra/io/yaml_files.py ``set_scalar``), on stack files in the
serving config's ``inference.models`` shape and on the project's own."""

from __future__ import annotations

import difflib
import subprocess
from pathlib import Path

import pytest
import yaml

from infra.core.errors import ConfigErrors
from infra.io.stackfiles import default_stacks_dir, list_stacks, stack_file
from infra.io.yaml_files import set_scalar
from infra.ops.promote import edited, previous_version, served_releases, serving_stacks, version_at

# An infer stack file in the inference.models shape: two base models, one with an adapter, comments
# and quoting as a person writes them.
MODELS = """\
# Production inference somewhere.
config:
  aiplat:platform:
    environment: prod
    role: infer
    region: ap-east-1
    inference:
      models:
        # the small one
        gpt2-small:
          release: {name: gpt2-small, version: 20261130T100100Z-step4, allow_latest: false}
          adapters:
            support-bot:
              release:
                name: support-bot
                version: "20261201T000000Z-step0"  # the first fine-tune
        llama:
          release:
            name: llama-3-8b
            version: 20261101T000000Z-step0   # keep
"""


def stacks(tmp_path: Path, **files: str) -> Path:
    folder = tmp_path / "stacks"
    folder.mkdir(parents=True, exist_ok=True)
    for stack, text in files.items():
        (folder / f"Pulumi.{stack}.yaml").write_text(text)
    return folder


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


def test_each_base_model_and_adapter_has_its_own_key() -> None:
    section = yaml.safe_load(MODELS)["config"]["aiplat:platform"]
    got = {(s.served, s.release, s.adapter_of): ".".join(s.keys) for s in served_releases(section)}
    assert got == {
        ("gpt2-small", "gpt2-small", None): "inference.models.gpt2-small.release.version",
        ("support-bot", "support-bot", "gpt2-small"): (
            "inference.models.gpt2-small.adapters.support-bot.release.version"
        ),
        ("llama", "llama-3-8b", None): "inference.models.llama.release.version",
    }


@pytest.mark.parametrize(
    ("model", "old", "new"),
    [
        ("gpt2-small", "20261130T100100Z-step4", "20261202T000000Z-step9"),  # flow mapping
        ("support-bot", '"20261201T000000Z-step0"', '"20261202T000000Z-step9"'),  # quoted, comment after
        ("llama-3-8b", "20261101T000000Z-step0", "20261202T000000Z-step9"),  # by release name
    ],
)
def test_a_promote_changes_that_version_and_not_one_other_character(
    tmp_path: Path, model: str, old: str, new: str
) -> None:
    folder = stacks(tmp_path, **{"prod-hk-infer": MODELS, "prod-sg-infer": MODELS.replace("ap-east-1", "x")})
    targets = serving_stacks(model, "prod", folder)
    assert [t.stack for t in targets] == ["prod-hk-infer", "prod-sg-infer"]
    after = edited(targets[0], "20261202T000000Z-step9")
    (minus, plus) = changed_lines(MODELS, after)
    assert minus.replace(old, new, 1)[1:] == plus[1:]  # the same line, that value replaced
    assert targets[0].current == yaml.safe_load(old)
    section = yaml.safe_load(after)["config"]["aiplat:platform"]
    assert {s.served: s for s in served_releases(section)}
    # the file read back names the new version at that model's key
    (target,) = [s for s in served_releases(section) if model in (s.served, s.release)]
    assert version_at(section, target.keys) == new.strip('"')


def test_the_project_stack_files_change_one_line_each() -> None:
    targets = serving_stacks("gpt2-small", "prod")
    infer = [s for s in list_stacks() if "infer" in s and s.startswith("prod-")]
    assert [t.stack for t in targets] == infer
    for t in targets:
        before = stack_file(t.stack, default_stacks_dir()).read_text()
        lines = changed_lines(before, edited(t, "20261202T000000Z-step9"))
        assert len(lines) == 2 and lines[1].endswith("20261202T000000Z-step9"), lines


def test_a_model_no_stack_serves_or_a_train_stack_is_refused(tmp_path: Path) -> None:
    folder = stacks(tmp_path, **{"prod-hk-infer": MODELS, "dev-hk-infer": MODELS.replace("prod", "dev")})
    with pytest.raises(ConfigErrors) as exc:
        serving_stacks("phi-3", "prod", folder)
    assert str(exc.value.errors[0]) == (
        "MODEL: 'phi-3' is served by no infer stack of prod; fix: one of: gpt2-small, llama-3-8b, support-bot"
    )
    assert [t.stack for t in serving_stacks("gpt2-small", "dev", folder)] == ["dev-hk-infer"]
    train = MODELS.replace("role: infer", "role: train")
    with pytest.raises(ConfigErrors):
        serving_stacks("gpt2-small", "prod", stacks(tmp_path / "t", **{"prod-us-train": train}))


def test_set_scalar_names_a_missing_key_and_quotes_what_yaml_would_misread() -> None:
    with pytest.raises(KeyError, match="config.aiplat:platform.inference.nope"):
        set_scalar(MODELS, ("config", "aiplat:platform", "inference", "nope"), "x")
    keys = ("config", "aiplat:platform", "region")
    assert yaml.safe_load(set_scalar(MODELS, keys, "20261202"))["config"]["aiplat:platform"]["region"] == (
        "20261202"
    )


def git(folder: Path, *argv: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *argv], cwd=folder, check=True,
        capture_output=True,
    )  # fmt: skip


def test_a_rollback_returns_to_the_version_the_file_named_before(tmp_path: Path) -> None:
    folder = stacks(tmp_path, **{"prod-hk-infer": MODELS})
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "first")
    (target,) = serving_stacks("support-bot", "prod", folder)
    assert previous_version(target) is None  # nothing before the first version
    for version in ("20261202T000000Z-step1", "20261203T000000Z-step2"):
        (folder / target.path.name).write_text(
            edited(serving_stacks("support-bot", "prod", folder)[0], version)
        )
        git(tmp_path, "commit", "-qam", f"promote {version}")
    # an unrelated commit after the promotion changes nothing
    (folder / target.path.name).write_text(MODELS.replace("# the small one", "# the smallest"))
    (folder / target.path.name).write_text(
        edited(serving_stacks("support-bot", "prod", folder)[0], "20261203T000000Z-step2")
    )
    git(tmp_path, "commit", "-qam", "comment")
    (now,) = serving_stacks("support-bot", "prod", folder)
    assert now.current == "20261203T000000Z-step2"
    assert previous_version(now) == "20261202T000000Z-step1"
