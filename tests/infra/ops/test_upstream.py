"""``aiplat facts upstream``: the EFA device plugin's instance list and the load balancer controller's IAM
policy read over HTTP from a local server that answers as GitHub does, with the upstream files recorded
verbatim (data/upstream/: aws/eks-charts at bfe91c4 and kubernetes-sigs/aws-load-balancer-controller at
v3.5.0, ``git show <commit>:<path>``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from infra.cli.main import main
from infra.core.instance_types import EFA_PLUGIN_CHART_VERSION, EFA_PLUGIN_FILE, EFA_PLUGIN_TYPES
from infra.mirror.pins import PINS
from infra.ops import upstream
from infra.services.documents.lbc_iam import POLICY, POLICY_FILE, SOURCE_TAG

RECORDED = Path(__file__).parent / "data" / "upstream"
EFA_SHA = "bfe91c4b9257c80f754ad4b3d6a9a3c239b2b8ec"
LBC_SHA = "11eb202c97e4ae2ee45e0658c4cde9a4b59f33d4"
# what GitHub answers: "Get a commit" with the sha media type, and raw files at a commit
REFS = {
    f"/repos/{upstream.EFA_REPO}/commits/master": EFA_SHA,
    f"/repos/{upstream.LBC_REPO}/commits/v3.5.0": LBC_SHA,
}
EFA_AT = f"/{upstream.EFA_REPO}/{EFA_SHA}/{upstream.EFA_CHART_DIR}"
FILES = {
    f"{EFA_AT}/Chart.yaml": "aws-efa-k8s-device-plugin.Chart.yaml",
    f"{EFA_AT}/values.yaml": "aws-efa-k8s-device-plugin.values.yaml",
    f"/{upstream.LBC_REPO}/{LBC_SHA}/{upstream.LBC_POLICY_PATH}": (
        "aws-load-balancer-controller.iam_policy.json"
    ),
}


class _GitHub(BaseHTTPRequestHandler):
    asked: list[tuple[str, str | None]] = []

    def do_GET(self) -> None:  # http.server's name for the GET handler
        self.asked.append((self.path, self.headers.get("Accept")))
        if self.path in REFS and self.headers.get("Accept") == "application/vnd.github.sha":
            body = REFS[self.path].encode()
        elif self.path in FILES:
            body = (RECORDED / FILES[self.path]).read_bytes()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def github() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _GitHub)  # a free port
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _GitHub.asked = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def _run(github: str, out: Path, *what: str) -> int:
    return main(
        ["facts", "upstream", *what, "--out-dir", str(out), "--github-api", github, "--github-raw", github]
    )


def test_refresh_writes_what_upstream_lists_with_commit_and_date(github, tmp_path, capsys) -> None:
    assert (
        _run(github, tmp_path, "--efa-device-plugin", "master", "--load-balancer-controller", "v3.5.0") == 0
    )
    assert ("/repos/aws/eks-charts/commits/master", "application/vnd.github.sha") in _GitHub.asked

    efa = json.loads((tmp_path / EFA_PLUGIN_FILE.name).read_text())
    entry = efa["versions"][efa["default"]]
    # the shipped data is what the command reads from the pinned chart
    assert efa["default"] == EFA_PLUGIN_CHART_VERSION
    assert frozenset(entry["instance_types"]) == EFA_PLUGIN_TYPES[EFA_PLUGIN_CHART_VERSION]
    assert (
        entry["source"]
        == f"https://github.com/aws/eks-charts/blob/{EFA_SHA}/{upstream.EFA_CHART_DIR}/values.yaml"
    )
    values = yaml.safe_load((RECORDED / "aws-efa-k8s-device-plugin.values.yaml").read_text())
    assert entry["image_tag"] == values["image"]["tag"] and entry["date"]
    # the image cache pins the image the recorded default deploys
    (pin,) = [p for p in PINS if p.chart == "aws-efa-k8s-device-plugin"]
    assert (pin.version, pin.tag) == (efa["default"], entry["image_tag"])

    lbc = json.loads((tmp_path / POLICY_FILE.name).read_text())
    assert (lbc["tag"], lbc["commit"]) == (SOURCE_TAG, LBC_SHA)
    assert lbc["policy"] == POLICY and lbc["date"] and LBC_SHA in lbc["source"]
    out = " ".join(capsys.readouterr().out.split())
    assert "v3.5.0 -> v3.5.0, policy unchanged" in out
    assert "0 added, 0 dropped" in out


def test_an_unknown_ref_is_one_line_and_writes_nothing(github, tmp_path, capsys) -> None:
    assert _run(github, tmp_path, "--load-balancer-controller", "v9.9.9") == 3
    err = " ".join(capsys.readouterr().err.split())
    assert (
        "error: GET " in err and "/repos/kubernetes-sigs/aws-load-balancer-controller/commits/v9.9.9" in err
    )
    assert "fix: check the ref or tag exists upstream" in err
    assert not (tmp_path / POLICY_FILE.name).exists()


def test_nothing_asked_is_a_usage_error(tmp_path, capsys) -> None:
    assert main(["facts", "upstream", "--out-dir", str(tmp_path)]) == 2
    assert "give --efa-device-plugin REF and/or --load-balancer-controller TAG" in capsys.readouterr().err
