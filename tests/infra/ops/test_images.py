"""``aiplat images``: digests read from the registry into infra/mirror/digests.py, the copy of the images no
cache rule takes into the stack's ECR, and the form of the digests file.

No registry can be reached here, so crane is a stand-in executable (``fake_crane``) that answers as crane
does (a digest on stdout; MANIFEST_UNKNOWN and exit 1 for what the registry lacks) from a JSON file of
references, and logs every command line. The ECR sign-in runs against the moto server over HTTP.
"""

from __future__ import annotations

import hashlib
import json
import runpy
import sys
from datetime import date
from pathlib import Path

import pytest

from infra.cli.main import main
from infra.io.crane import CraneMissing, Missing, crane_runner, ecr_region
from infra.io.stackfiles import load_stack_config
from infra.mirror.digests import DIGESTS, RecordedDigest
from infra.mirror.documents import CacheLayout, Placement, placement
from infra.mirror.pins import PINS, ImagePin
from infra.mirror.rules import stack_pins
from infra.ops.images import (
    DIGESTS_FILE,
    CopyOutcome,
    Outcome,
    copy_images,
    render_digests,
    resolve,
    selected_pins,
)
from trainer.tools.moto_server import MotoServer

FAKE = """\
import json, os, sys
state_file = os.environ["FAKE_CRANE_STATE"]
state = json.load(open(state_file))
with open(os.environ["FAKE_CRANE_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
cmd = sys.argv[1]
if cmd == "version":
    print("v0.20.7")
elif cmd == "digest":
    ref = sys.argv[2]
    if ref not in state:
        print("Error: GET https://x/v2/...: MANIFEST_UNKNOWN: manifest unknown", file=sys.stderr)
        sys.exit(1)
    print(state[ref])
elif cmd == "copy":
    src, dst = sys.argv[2], sys.argv[3]
    state[dst] = src.split("@", 1)[1]
    json.dump(state, open(state_file, "w"))
elif cmd == "auth":
    password = sys.stdin.read()
    with open(os.environ["FAKE_CRANE_LOG"], "a") as log:
        log.write(json.dumps({"login": sys.argv[3], "password_chars": len(password)}) + "\\n")
"""


def _digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


class FakeCrane:
    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state: dict[str, str]) -> None:
        script = tmp_path / "crane.py"
        script.write_text(FAKE)
        exe = tmp_path / "crane"
        exe.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
        exe.chmod(0o755)
        self.state_file, self.log = tmp_path / "state.json", tmp_path / "log.jsonl"
        self.state_file.write_text(json.dumps(state))
        self.log.write_text("")
        monkeypatch.setenv("AIPLAT_CRANE", str(exe))
        monkeypatch.setenv("FAKE_CRANE_STATE", str(self.state_file))
        monkeypatch.setenv("FAKE_CRANE_LOG", str(self.log))

    def state(self) -> dict[str, str]:
        return json.loads(self.state_file.read_text())

    def calls(self) -> list:
        return [json.loads(line) for line in self.log.read_text().splitlines()]


def _registry_answers(pins: list[ImagePin]) -> dict[str, str]:
    """What the stand-in registry holds: every pin's tag, at its recorded digest where there is one."""
    return {f"{p.image}:{p.tag}": p.digest or _digest(p.image + p.tag) for p in pins}


# -- the digests file ------------------------------------------------------------------------------------


def test_the_digests_file_is_in_the_form_the_tool_writes() -> None:
    # so `aiplat images resolve` rewriting it changes only the entries it read
    assert DIGESTS_FILE.read_text() == render_digests(DIGESTS)


def test_every_recorded_digest_is_a_sha256_of_an_image_a_chart_runs() -> None:
    images = {(p.image, p.tag) for p in PINS}
    for key, d in DIGESTS.items():
        assert key in images, key
        assert d.digest.startswith("sha256:") and len(d.digest) == 71 and d.source and d.read


def test_a_long_source_is_split_within_the_line_length(tmp_path: Path) -> None:
    long = RecordedDigest(digest=_digest("x"), source="word " * 60 + 'and a "quote"', read="2026-12-02")
    text = render_digests({("quay.io/a/b", "v1"): long})
    assert max(len(line) for line in text.splitlines()) <= 110
    (tmp_path / "d.py").write_text(text)
    assert runpy.run_path(str(tmp_path / "d.py"))["DIGESTS"][("quay.io/a/b", "v1")].source == long.source


# -- resolve and copy, with crane as a function ----------------------------------------------------------


def test_resolve_records_the_missing_and_check_replaces_a_wrong_one() -> None:
    pins = selected_pins([load_stack_config("prod-us-train")])
    registry = _registry_answers(pins)
    wrong = next(p for p in pins if p.digest is not None)
    registry[f"{wrong.image}:{wrong.tag}"] = _digest("rebuilt")
    absent = next(p for p in pins if p.digest is None)
    del registry[f"{absent.image}:{absent.tag}"]

    def crane(argv: list[str], stdin: str | None) -> str:
        assert argv[0] == "digest" and stdin is None
        if argv[1] not in registry:
            raise Missing(f"`crane digest {argv[1]}` failed: MANIFEST_UNKNOWN")
        return registry[argv[1]] + "\n"

    today = date(2026, 12, 2)
    outcomes, new = resolve(pins, crane, check=False, version="v0.20.7", today=today)
    by = {(r.pin.image, r.pin.tag): r for r in outcomes}
    assert all(p.digest is None for p in (r.pin for r in outcomes))  # recorded ones not asked without --check
    assert by[(absent.image, absent.tag)].outcome is Outcome.failed
    missing = {(p.image, p.tag) for p in pins if p.digest is None} - {(absent.image, absent.tag)}
    assert set(new) == missing
    one = new[next(iter(missing))]
    assert one.read == "2026-12-02" and one.source.startswith("the registry: `crane digest ")

    outcomes, new = resolve(pins, crane, check=True, version="v0.20.7", today=today)
    by = {(r.pin.image, r.pin.tag): r for r in outcomes}
    assert by[(wrong.image, wrong.tag)].outcome is Outcome.differs
    assert new[(wrong.image, wrong.tag)].digest == _digest("rebuilt")
    assert (
        sum(r.outcome is Outcome.same for r in outcomes)
        == len({(p.image, p.tag) for p in pins if p.digest}) - 1
    )


def test_an_answer_that_is_not_a_digest_is_refused() -> None:
    pin = next(p for p in PINS if p.digest is None)
    outcomes, new = resolve(
        [pin], lambda argv, stdin: "sha256:abc\n", check=False, version="v", today=date.today()
    )
    assert outcomes[0].outcome is Outcome.failed and "not a sha256 digest" in outcomes[0].detail
    assert new == {}


CACHE = CacheLayout(
    registry="123456789012.dkr.ecr.us-east-1.amazonaws.com",
    prefix="p",
    upstreams={"quay.io": "quay", "registry.k8s.io": "k8s", "public.ecr.aws": "ecr-public"},
)


def test_copy_copies_by_digest_skips_what_is_there_and_refuses_a_changed_tag() -> None:
    pins = [p for p in PINS if p.chart in ("keda", "kube-prometheus-stack", "fluent-bit")]
    copied = [p for p in pins if placement(CACHE, p.image).kind is Placement.copied]
    keda, metrics, hooks = (p for p in copied if p.chart == "keda")
    target = {p.values: f"{CACHE.registry}/p/copy/{p.image}:{p.tag}" for p in copied}
    registry = {target[metrics.values]: metrics.digest, target[hooks.values]: _digest("other")}
    calls: list[list[str]] = []

    def crane(argv: list[str], stdin: str | None) -> str:
        calls.append(argv)
        if argv[0] == "copy":
            registry[argv[2]] = argv[1].split("@", 1)[1]
            return ""
        if argv[1] not in registry:
            raise Missing("MANIFEST_UNKNOWN")
        return registry[argv[1]]

    out = {c.pin.values: c for c in copy_images(pins, CACHE, crane)}
    assert set(out) == {p.values for p in copied}  # the cached images are not touched
    assert out[keda.values].outcome is CopyOutcome.copied
    assert ["copy", f"ghcr.io/kedacore/keda@{keda.digest}", target[keda.values]] in calls
    assert out[metrics.values].outcome is CopyOutcome.present
    assert out[hooks.values].outcome is CopyOutcome.conflict and "immutable" in out[hooks.values].detail
    fluent = next(p for p in copied if p.chart == "fluent-bit" and p.values == "image")
    assert out[fluent.values].outcome is CopyOutcome.no_digest
    assert not any(c[0] == "copy" and fluent.image in c[1] for c in calls)


# -- the real runner and the CLI, with the stand-in crane ------------------------------------------------


def test_the_runner_tells_a_missing_manifest_and_a_missing_crane(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    FakeCrane(tmp_path, monkeypatch, {"quay.io/a/b:v1": _digest("b")})
    crane = crane_runner()
    assert crane(["digest", "quay.io/a/b:v1"], None).strip() == _digest("b")
    with pytest.raises(Missing, match="MANIFEST_UNKNOWN"):
        crane(["digest", "quay.io/a/b:v2"], None)
    with pytest.raises(CraneMissing, match="install crane"):
        crane_runner(str(tmp_path / "nowhere"))(["version"], None)
    assert ecr_region("602401143452.dkr.ecr.us-west-2.amazonaws.com") == "us-west-2"
    assert ecr_region("quay.io") is None


def test_cli_resolve_writes_every_missing_digest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = load_stack_config("prod-us-train")
    pins = stack_pins(cfg)
    fake = FakeCrane(tmp_path, monkeypatch, _registry_answers(pins))
    out_file = tmp_path / "digests.py"
    assert main(["images", "resolve", "--stack", "prod-us-train", "--digests-file", str(out_file)]) == 0
    written = runpy.run_path(str(out_file))["DIGESTS"]
    assert {(p.image, p.tag) for p in pins} <= set(written)  # every image of the stack has its digest
    assert set(DIGESTS) <= set(written) and all(written[k].digest == d.digest for k, d in DIGESTS.items())
    assert out_file.read_text() == render_digests({k: v for k, v in written.items()})
    assert all(c[0] in ("version", "digest") for c in fake.calls())
    assert "wrote " in capsys.readouterr().out

    # --check: a recorded digest the registry contradicts is replaced and reported (exit 1)
    state = fake.state()
    key = "quay.io/jetstack/cert-manager-controller:v1.21.1"
    state[key] = _digest("rebuilt")
    fake.state_file.write_text(json.dumps(state))
    assert main(["images", "resolve", "--stack", "prod-us-train", "--check", "--dry-run"]) == 1
    assert f"{key}: differs {_digest('rebuilt')}" in capsys.readouterr().out


def test_cli_without_crane_exits_4(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIPLAT_CRANE", str(tmp_path / "nowhere"))
    assert main(["images", "resolve", "--stack", "prod-us-train", "--dry-run"]) == 4


def test_cli_list_names_the_images_without_a_digest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["images", "list", "--stack", "prod-us-train"]) == 1
    err = capsys.readouterr().err
    assert "no digest of cr.fluentbit.io/fluent/fluent-bit:5.1.1 is recorded" in err


def test_cli_copy_signs_in_with_the_password_on_stdin_and_copies(
    aws: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = load_stack_config("prod-us-train")
    pins = stack_pins(cfg)
    fake = FakeCrane(tmp_path, monkeypatch, _registry_answers(pins))
    # 1: fluent-bit and the other copied images without a digest are not copied (resolve first)
    assert main(["images", "copy", "--stack", "prod-us-train"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    registry = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
    grafana = DIGESTS[("docker.io/grafana/grafana", "13.2.0")].digest
    target = f"{registry}/aiplat-prod-train/copy/docker.io/grafana/grafana:13.2.0"
    assert f"docker.io/grafana/grafana:13.2.0 -> {target}: copied" in out
    assert fake.state()[target] == grafana
    assert "cr.fluentbit.io/fluent/fluent-bit:5.1.1" in out and "no digest" in out
    dcgm = f"{registry}/aiplat-prod-train/copy/nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2-distroless"
    assert f"-> {dcgm}: copied" in out  # nvcr.io, by its recorded digest
    logins = [c for c in fake.calls() if isinstance(c, dict)]
    hosts = {c["login"] for c in logins}
    # our registry, and EKS's for the EFA plugin (an ECR source)
    assert hosts == {registry, "602401143452.dkr.ecr.us-west-2.amazonaws.com"}
    assert all(c["password_chars"] > 0 for c in logins)
    argv = [c for c in fake.calls() if isinstance(c, list) and c[0] == "auth"]
    assert argv and all(a[-1] == "--password-stdin" for a in argv)  # no password on the command line
    # again: what is there is left alone
    assert main(["images", "copy", "--stack", "prod-us-train"]) == 1
    assert f"{target}: present" in " ".join(capsys.readouterr().out.split())


def test_cli_copy_refuses_credentials_of_another_account(
    aws: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    FakeCrane(tmp_path, monkeypatch, {})
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    text = (Path(__file__).parents[3] / "stacks" / "Pulumi.prod-us-train.yaml").read_text()
    (stacks / "Pulumi.prod-us-train.yaml").write_text(
        text.replace('id: "123456789012"', 'id: "210987654321"')
    )
    assert main(["images", "copy", "--stack", "prod-us-train", "--stacks-dir", str(stacks)]) == 1
    err = " ".join(capsys.readouterr().err.split())
    # the caller-account check the program runs too (infra/keys/rules.py account_findings)
    assert "security.account.id: is 210987654321 but the credentials are of account 123456789012" in err
