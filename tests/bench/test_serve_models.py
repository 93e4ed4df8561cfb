"""Part 3 of the GPU check (bench/gpu/serve_models.py) on CPU: the Llama release is really built, published
by our publisher and fetched verified, the peft adapter really changes greedy tokens, the router's flags are
the installed vllm-router's; and the figures it reports from `vllm bench serve` results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.gpu.serve_models import ADAPTER, BASE, RANK, summary
from tests.bench.test_gpu_stats import vllm_result
from trainer.release.manifest import VERSION_RE

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_dry_run_builds_publishes_and_fetches_a_llama_release_and_an_adapter(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, str(REPO / "bench/gpu/serve_models.py"), "--dry-run", "--work", str(tmp_path)],
        capture_output=True, text=True, timeout=600, cwd="/",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["mode"] == "dry-run" and VERSION_RE.match(got["release"])
    served = tmp_path / "node" / BASE
    config = json.loads((served / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and (served / "manifest.json").is_file()
    adapter = json.loads((tmp_path / "node" / ADAPTER / "adapter_config.json").read_text())
    assert adapter["r"] == got["adapter"]["rank"] == RANK
    assert got["adapter"]["greedy_adapter"] != got["adapter"]["greedy_base"]  # the adapter does something
    serve = got["commands"]["serve"].split()
    assert serve[:3] == ["vllm", "serve", str(served)]
    assert serve[serve.index("--lora-modules") + 1] == f"{ADAPTER}={tmp_path / 'node' / ADAPTER}"
    if "router" in got["commands"]:  # the venv has the vllm-router wheel (pyproject)
        assert got["router_flags_known"] is True
        assert got["commands"]["router"].split()[-3:] == ["http://127.0.0.1:8021", "--policy", "round_robin"]


def test_the_router_figures_are_ratios_to_the_direct_path() -> None:
    direct = [vllm_result(c, 100.0 * c, 10.0) for c in (1, 16, 64)]
    routed = [vllm_result(c, 90.0 * c, 10.0, p99_ttft_ms=30.0) for c in (1, 16, 64)]
    got = summary({f"direct/{BASE}": direct, f"router/{BASE}": routed})
    assert got[f"direct/{BASE}"]["16"]["output_tok_s"] == 1600.0
    ratios = got[f"router/{BASE} vs direct"]
    assert sorted(ratios) == ["1", "16", "64"]
    assert {round(v["tok_s_ratio"], 6) for v in ratios.values()} == {0.9}
    p99 = {c: v["p99_ttft_ms"] for c, v in got[f"direct/{BASE}"].items()}
    assert ratios["64"]["p99_ttft_ratio"] == 30.0 / p99["64"]
