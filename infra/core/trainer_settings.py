"""What the cluster side needs to know about a trainer config file, as plain data.

The runtime mounts the node's NVMe cache at the config's ``data.cache_dir``, gives pods a termination grace
period of at least ``checkpoint.shutdown_window_s`` and scrapes ``metrics.port_base + LOCAL_RANK``. The
file is read (and validated with the trainer's own loader) by ``infra/io/trainer_configs.py``; rules
compare runs with the runtime through this type.
"""

from __future__ import annotations

from dataclasses import dataclass

# The ports the platform scrapes the trainer on: metrics.port_base + LOCAL_RANK with the trainer's default
# base 9400 (trainer/config.py MetricsConfig), 9400-9407 for 8 GPUs per node. The PodMonitor
# (lib/monitoring.TRAINER_PORT_REGEX) and the training namespace's NetworkPolicy admit these; the rule
# trainer-configs-load refuses a runtime config whose ports fall outside them.
SCRAPED_METRICS_PORTS = (9400, 9407)


@dataclass(frozen=True)
class TrainerSettings:
    """The cluster-relevant settings of one trainer config file (after ``--set`` overrides)."""

    path: str  # relative to the repository root, as the stack file names it
    cache_dir: str
    shutdown_window_s: float
    metrics_port_base: int  # 0: no metrics endpoint
    # the config's own problem, one line ("" when it loaded); rules turn it into a refusal
    error: str = ""

    def image_path(self, workdir: str = "/opt/trainer") -> str:
        """Where the file is inside the trainer image (the image copies ``trainer/`` under its workdir)."""
        return f"{workdir.rstrip('/')}/{self.path}"
