"""EFA counters for Prometheus: reads the EFA driver's hardware counters from sysfs at every scrape.

Our own exporter because node-exporter drops every EFA counter and a textfile collector serves stale
values after its writer dies (docs/platform/monitoring.md). Standard library only: the DaemonSet
(``EfaExporter``, infra/monitoring/component/exporters.py) mounts it from a ConfigMap into a stock image.

Counter names: amzn/amzn-drivers ``kernel/linux/efa/src/efa_verbs.c`` (tag efa_linux_3.1.0, commit
64788ef7c182a9383445942b5f5f77fe1d25a290), ``EFA_DEFINE_PORT_STATS`` ->
``/sys/class/infiniband/<dev>/ports/<port>/hw_counters/<name>``, ``EFA_DEFINE_DEVICE_STATS`` ->
``/sys/class/infiniband/<dev>/hw_counters/<name>``; AWS documents the same set:
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-working-monitor.html
Every file found is exported; ``PORT_COUNTERS`` and ``DEVICE_COUNTERS`` are the names dashboards and
alerts may rely on.

Metrics (counters cumulative since the driver loaded): ``efa_<counter>_total{device, port}``,
``efa_device_<counter>_total{device}``, ``efa_port_state{device, port}`` (4 = ACTIVE),
``efa_exporter_devices`` and ``efa_exporter_read_errors`` (files unreadable in this scrape).

Environment: ``EFA_EXPORTER_SYSFS`` (default ``/host/sys``), ``EFA_EXPORTER_PORT`` (9809),
``EFA_EXPORTER_ADDRESS`` (``0.0.0.0``).
"""

from __future__ import annotations

import os
import re
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PORT_COUNTERS = (
    "tx_bytes",
    "tx_pkts",
    "rx_bytes",
    "rx_pkts",
    "rx_drops",
    "send_bytes",
    "send_wrs",
    "recv_bytes",
    "recv_wrs",
    "rdma_read_wrs",
    "rdma_read_bytes",
    "rdma_read_wr_err",
    "rdma_read_resp_bytes",
    "rdma_write_wrs",
    "rdma_write_bytes",
    "rdma_write_wr_err",
    "rdma_write_recv_bytes",
    "retrans_bytes",
    "retrans_pkts",
    "retrans_timeout_events",
    "unresponsive_remote_events",
    "impaired_remote_conn_events",
)
DEVICE_COUNTERS = (
    "submitted_cmds",
    "completed_cmds",
    "cmds_err",
    "no_completion_cmds",
    "keep_alive_rcvd",
    "alloc_pd_err",
    "create_qp_err",
    "create_cq_err",
    "reg_mr_err",
    "alloc_ucontext_err",
    "create_ah_err",
    "mmap_err",
)
# ``lifespan`` (the RDMA core's counter refresh period in ms) sits beside the counters but is a setting.
NOT_COUNTERS = frozenset({"lifespan"})
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_NAME = re.compile(r"[^a-zA-Z0-9_]")


def _read_int(path: Path) -> int:
    """The integer a sysfs counter file holds (``state`` files read ``4: ACTIVE``)."""
    return int(path.read_text().split(":", 1)[0].strip())


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(**labels: str) -> str:
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items()) + "}"


def _counter_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.iterdir() if p.name not in NOT_COUNTERS and p.is_file())


def collect(sysfs: Path) -> str:
    """The exposition text for every RDMA device under ``<sysfs>/class/infiniband``."""
    families: dict[str, tuple[str, str, list[str]]] = {}  # name -> (type, help, sample lines)
    errors = 0

    def add(name: str, kind: str, help_text: str, labels: str, value: int) -> None:
        families.setdefault(name, (kind, help_text, []))[2].append(f"{name}{labels} {value}")

    root = sysfs / "class" / "infiniband"
    devices = sorted(root.iterdir()) if root.is_dir() else []
    for dev in devices:
        for path in _counter_files(dev / "hw_counters"):
            try:
                value = _read_int(path)
            except (OSError, ValueError):
                errors += 1
                continue
            name = f"efa_device_{_NAME.sub('_', path.name)}_total"
            add(name, "counter", f"EFA device counter {path.name}", _labels(device=dev.name), value)
        ports = sorted((dev / "ports").iterdir()) if (dev / "ports").is_dir() else []
        for port in ports:
            labels = _labels(device=dev.name, port=port.name)
            try:
                add("efa_port_state", "gauge", "Port state (4 = ACTIVE)", labels, _read_int(port / "state"))
            except (OSError, ValueError):
                errors += 1
            for path in _counter_files(port / "hw_counters"):
                try:
                    value = _read_int(path)
                except (OSError, ValueError):
                    errors += 1
                    continue
                name = f"efa_{_NAME.sub('_', path.name)}_total"
                add(name, "counter", f"EFA port counter {path.name}", labels, value)
    add("efa_exporter_devices", "gauge", "RDMA devices found under class/infiniband", "", len(devices))
    add("efa_exporter_read_errors", "gauge", "Files that could not be read in this scrape", "", errors)
    out: list[str] = []
    for name in sorted(families):
        kind, help_text, samples = families[name]
        out += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]
    return "\n".join(out) + "\n"


def make_handler(sysfs: Path) -> type[BaseHTTPRequestHandler]:
    """A request handler serving ``collect(sysfs)`` at ``/metrics`` and ``ok`` at ``/healthz``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path == "/metrics":
                body, kind = collect(sysfs).encode(), CONTENT_TYPE
            elif self.path == "/healthz":
                body, kind = b"ok\n", "text/plain"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # one line per scrape is noise

    return Handler


def main() -> int:
    """Serve until killed."""
    sysfs = Path(os.environ.get("EFA_EXPORTER_SYSFS", "/host/sys"))
    port = int(os.environ.get("EFA_EXPORTER_PORT", "9809"))
    address = os.environ.get("EFA_EXPORTER_ADDRESS", "0.0.0.0")
    server = ThreadingHTTPServer((address, port), make_handler(sysfs))
    print(f"efa-exporter: serving {sysfs}/class/infiniband on {address}:{port}", file=sys.stderr, flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
