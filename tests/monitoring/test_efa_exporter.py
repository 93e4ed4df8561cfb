"""The EFA exporter against a sysfs tree laid out as the EFA driver lays it out, and over real HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.monitoring.test_metric_names import MON, fake_sysfs, load_efa_exporter
from trainer.run.ports import free_port

SCRIPT = MON / "efa" / "efa_exporter.py"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def test_counters_per_device_and_port(tmp_path: Path) -> None:
    efa = load_efa_exporter()
    got = samples(efa.collect(fake_sysfs(tmp_path, efa, devices=2)))
    port = (("device", "rdmap1s0"), ("port", "1"))
    index = efa.PORT_COUNTERS.index("retrans_pkts")
    assert got[("efa_retrans_pkts_total", port)] == 1000 + index
    assert got[("efa_tx_bytes_total", port)] == 1000
    cmds_err = efa.DEVICE_COUNTERS.index("cmds_err")
    assert got[("efa_device_cmds_err_total", (("device", "rdmap0s0"),))] == cmds_err
    assert got[("efa_port_state", port)] == 4
    assert got[("efa_exporter_devices", ())] == 2
    assert got[("efa_exporter_read_errors", ())] == 0
    # lifespan is the refresh period, not a counter
    assert not any("lifespan" in name for name, _ in got)
    per_port = {name for name, labels in got if dict(labels).get("port") == "1"}
    assert per_port == {f"efa_{c}_total" for c in efa.PORT_COUNTERS} | {"efa_port_state"}


def test_counters_are_typed_counters(tmp_path: Path) -> None:
    efa = load_efa_exporter()
    text = efa.collect(fake_sysfs(tmp_path, efa))
    families = {f.name: f.type for f in text_string_to_metric_families(text)}
    assert families["efa_retrans_pkts"] == "counter"  # the parser strips _total from counter families
    assert families["efa_port_state"] == "gauge"


def test_new_driver_counters_appear_and_unreadable_files_are_counted(tmp_path: Path) -> None:
    efa = load_efa_exporter()
    root = fake_sysfs(tmp_path, efa, devices=1)
    counters = root / "class" / "infiniband" / "rdmap0s0" / "ports" / "1" / "hw_counters"
    (counters / "some_future_counter").write_text("7\n")
    (counters / "tx_pkts").write_text("not a number\n")
    got = samples(efa.collect(root))
    port = (("device", "rdmap0s0"), ("port", "1"))
    assert got[("efa_some_future_counter_total", port)] == 7
    assert ("efa_tx_pkts_total", port) not in got
    assert got[("efa_exporter_read_errors", ())] == 1


def test_no_devices(tmp_path: Path) -> None:
    efa = load_efa_exporter()
    got = samples(efa.collect(tmp_path))
    assert got == {("efa_exporter_devices", ()): 0, ("efa_exporter_read_errors", ()): 0}


def test_serves_metrics_over_http(tmp_path: Path) -> None:
    """The script as the DaemonSet runs it: ``python3 efa_exporter.py`` with its environment."""
    efa = load_efa_exporter()
    root = fake_sysfs(tmp_path / "sys", efa, devices=1)
    port = free_port()
    env = {
        **os.environ,
        "EFA_EXPORTER_SYSFS": str(root),
        "EFA_EXPORTER_PORT": str(port),
        "EFA_EXPORTER_ADDRESS": "127.0.0.1",
    }
    proc = subprocess.Popen([sys.executable, str(SCRIPT)], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                    assert r.read() == b"ok\n"
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    err = proc.stderr.read() if proc.poll() is not None else ""
                    pytest.fail(f"exporter did not start: {err}")
                time.sleep(0.1)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            got = samples(r.read().decode())
        assert got[("efa_rx_bytes_total", (("device", "rdmap0s0"), ("port", "1")))] == 1002
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)
        assert err.value.code == 404
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stderr.close()
