"""Cost allocation as data: what each node costs per hour (per pool and purchase option, from the price table
of ``aiplat cost``), OpenCost's CSV price file and default prices built from it, and the chart's values. Pure.

How OpenCost prices a node (opencost/opencost, the source behind image 1.120.1):
- ``USE_CSV_PROVIDER=true`` makes it use its CSV provider whatever the node's provider ID
  (``pkg/cloud/provider/provider.go`` getClusterProperties): no AWS pricing API, no Spot data feed, no
  AWS credentials. The file (``CSV_PATH``, re-read every 60 minutes) holds one row per price:
  ``EndTimestamp,InstanceID,Region,AssetClass,InstanceIDField,InstanceType,MarketPriceHourly,Version``
  (``pkg/cloud/provider/csvprovider.go``, struct ``price``; it hands that header to jszwec/csvutil's
  ``NewDecoder``, which then reads the file's first line as data, so the file has none; a line of one field
  starting with ``#`` is skipped).
- A node matches a row when its value of ``InstanceIDField`` (here the label ``aiplat.io/pool``) equals
  ``InstanceID``, prefixed by the region when rows name one; a row that also names ``InstanceType`` is a
  class price for every node of that type in the region, and it wins over the exact match
  (``NodePricing``). Managed pools get exact rows by pool; a Karpenter pool's types get class rows.
  Every row names the region, so every key has it.
- A node's price is its total per hour. On a GPU node OpenCost splits it into CPU, RAM and GPU parts by
  the ratios of the default CPU, RAM and GPU prices (``pkg/costmodel/costmodel.go`` GetNodeCost: "GPU
  without cost found ... distribute the total node cost among the CPU, RAM, and GPU"); on a CPU node into
  CPU and RAM. So the defaults below set the split, the CSV sets what each node costs. An unmatched node
  is priced at the defaults per vCPU, GiB and GPU.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from infra.core.facts import RegionFacts
from infra.cost.estimate import CONFIGURED_OPTION, Lookup, Option, PriceTable, estimate_karpenter
from infra.karpenter.config import CapacityKind
from infra.pools.documents.nodes import POOL_LABEL

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

RELEASE = "opencost"  # also fullnameOverride: Deployment, Service and ServiceMonitor are named "opencost"
# The cost model's API and /metrics port (chart values opencost.exporter.apiPort 9003, Service port "http").
API_PORT = 9003
# OpenCost's custom pricing ConfigMap (chart template configmap-custom-pricing.yaml, created by the chart);
# the cost model watches it by name (PRICING_CONFIGMAP_NAME).
PRICING_CONFIGMAP = "opencost-default-prices"
# Ours: the CSV of node prices, mounted into the cost model (extraVolumes / extraVolumeMounts).
NODE_PRICES_CONFIGMAP = "opencost-node-prices"
NODE_PRICES_KEY = "node-prices.csv"
NODE_PRICES_DIR = "/var/opencost/node-prices"
NODE_PRICES_VOLUME = "node-prices"
# Which node field the rows' InstanceID is compared with (csvprovider.go NodeValueFromMapField: a label key
# may contain dots, everything after "metadata.labels." is the key).
POOL_FIELD = f"metadata.labels.{POOL_LABEL}"
# The chart joins the in-cluster Prometheus' address as <service>.<namespace>.svc.<clusterName>
# (templates/_helpers.tpl opencost.prometheusServerEndpoint): clusterName is the cluster's DNS domain there.
CLUSTER_DOMAIN = "cluster.local"
# The ratio of OpenCost's own default CPU (per vCPU-hour) to RAM (per GiB-hour) price: configs/default.json
# ("CPU": "0.031611", "RAM": "0.004237"). AWS prices instances, not vCPUs and GiB; this ratio only splits a
# node's price into CPU and memory parts (what a pod that requests more memory than CPU pays).
OPENCOST_CPU_PER_GIB_RATIO = 0.031611 / 0.004237
CPU_PRICE_SOURCE = "opencost/opencost configs/default.json (the CPU:RAM ratio only)"
OPENCOST_DEFAULTS = "opencost/opencost configs/default.json (no pool of the stack priced)"


@dataclass(frozen=True, kw_only=True)
class NodePrice:
    """What one pool's node costs per hour (a Karpenter pool: one row per instance type it may launch):
    ``option`` the purchase option priced, ``source`` the price table's source key, ``label`` what was
    looked up; ``by_type``: matched by instance type (Karpenter), else by the node's pool label."""

    pool: str
    instance_type: str
    option: Option
    usd: float
    source: str
    label: str
    gpus: int = 0
    by_type: bool = False
    note: str = ""

    @property
    def instance_id(self) -> str:
        # A class row's InstanceID matches no node's pool label: only its instance type prices a node.
        return f"{self.pool}/{self.instance_type}" if self.by_type else self.pool


@dataclass(frozen=True, kw_only=True)
class NodePrices:
    """Every node price of the stack, and what could not be priced: (the pool's dotted config field, why)."""

    region: str
    rows: tuple[NodePrice, ...]
    unpriced: tuple[tuple[str, str], ...] = ()


def _karpenter_option(capacity_types: Sequence[CapacityKind]) -> Option:
    """The option a Karpenter pool's class rows take: Spot when it launches only Spot; else On-Demand, the
    upper bound (a pool with both cannot be told apart by instance type: csvprovider.go keys classes by
    region and type only)."""
    return Option.spot if tuple(capacity_types) == (CapacityKind.spot,) else Option.on_demand


def node_prices(cfg: PlatformConfig, table: PriceTable, facts: RegionFacts | None) -> NodePrices:
    """Each managed pool's node at its configured purchase option (On-Demand, Spot at the highest zone price
    as ``aiplat cost`` takes it, a Capacity Block's effective rate, an ODCR at the On-Demand rate it bills),
    and each Karpenter pool's candidate types (``facts``: the region's, ``gpu_offer``)."""
    look = Lookup(table, cfg.region)
    rows: list[NodePrice] = []
    unpriced: list[tuple[str, str]] = []
    managed_types: dict[str, set[float]] = {}  # instance type -> the managed pools' prices of it
    for name, pool in sorted(cfg.node_pools.items()):
        option = CONFIGURED_OPTION[pool.capacity_type]
        price = look.instance(pool.instance_type, option)
        if price.usd is None:
            unpriced.append((f"node_pools.{name}", f"{price.label}: {price.note}"))
            continue
        gpus = (
            facts.instances[pool.instance_type].gpu_count
            if facts and pool.instance_type in facts.instances
            else 0
        )
        rows.append(
            NodePrice(
                pool=name,
                instance_type=pool.instance_type,
                option=option,
                usd=price.usd,
                source=price.source,
                label=price.label,
                gpus=gpus,
                note=price.note,
            )
        )
        managed_types.setdefault(pool.instance_type, set()).add(price.usd)
    by_type: dict[str, NodePrice] = {}
    for k in estimate_karpenter(cfg, look, facts):
        option = _karpenter_option(k.capacity_types)
        field = f"cluster_services.karpenter.node_pools.{k.pool}"
        if facts is None:
            unpriced.append((field, "no region facts name its instance types"))
            continue
        for c in k.candidates:
            price = c.prices[option]
            if price.usd is None:
                unpriced.append((field, f"{price.label}: {price.note}"))
                continue
            if managed_types.get(c.instance_type, {price.usd}) != {price.usd}:
                # a class row would also price the managed pool's nodes of that type: they keep theirs
                unpriced.append(
                    (
                        field,
                        f"{c.instance_type} is also a managed pool's type at another price; its Karpenter "
                        "nodes are priced at OpenCost's default rates",
                    )
                )
                continue
            row = NodePrice(
                pool=k.pool,
                instance_type=c.instance_type,
                option=option,
                usd=price.usd,
                source=price.source,
                label=price.label,
                gpus=c.gpus,
                by_type=True,
                note=price.note,
            )
            # two Karpenter pools launching one type at two prices: the dearer (an upper bound)
            if c.instance_type not in by_type or by_type[c.instance_type].usd < row.usd:
                by_type[c.instance_type] = row
    rows += [by_type[t] for t in sorted(by_type)]
    return NodePrices(region=cfg.region, rows=tuple(rows), unpriced=tuple(unpriced))


def _price_text(usd: float) -> str:
    return f"{usd:.6f}".rstrip("0").rstrip(".") or "0"


def node_prices_csv(prices: NodePrices, *, table_read: str) -> str:
    """OpenCost's CSV price file (no header: see the module docstring), each row's source in ``Version``."""
    lines = [
        f"# aiplat node prices per pool and purchase option: infra/cost/data/prices.yaml read {table_read}",
        "# EndTimestamp InstanceID Region AssetClass InstanceIDField InstanceType MarketPriceHourly Version",
    ]
    for r in prices.rows:
        fields = [
            "",
            r.instance_id,
            prices.region,
            "node",
            POOL_FIELD,
            r.instance_type if r.by_type else "",
            _price_text(r.usd),
            f"{r.source}:{r.option.value}",
        ]
        assert not any("," in f or '"' in f for f in fields), fields  # names and keys of ours: never quoted
        lines.append(",".join(fields))
    return "\n".join(lines) + "\n"


@dataclass(frozen=True, kw_only=True)
class DefaultPrices:
    """OpenCost's default prices (per vCPU-hour, GiB-hour, GPU-hour) and where each came from."""

    cpu: float
    ram: float
    spot_cpu: float
    spot_ram: float
    gpu: float
    sources: Mapping[str, str]

    def cost_model(self) -> dict[str, str]:
        """The chart's ``opencost.customPricing.costModel`` (values.yaml at 2.5.17 lists these keys): every
        key set, so none of the chart's sample prices stays. Storage and network egress are not priced:
        the table has no EBS price and OpenCost's network costs need its network DaemonSet (not run)."""
        return {
            "description": "aiplat: infra/cost/data/prices.yaml (docs/platform/cost.md)",
            "CPU": _price_text(self.cpu),
            "spotCPU": _price_text(self.spot_cpu),
            "RAM": _price_text(self.ram),
            "spotRAM": _price_text(self.spot_ram),
            "GPU": _price_text(self.gpu),
            "storage": "0",
            "zoneNetworkEgress": "0",
            "regionNetworkEgress": "0",
            "internetNetworkEgress": "0",
        }


def _split(usd: float, vcpus: int, memory_mib: int) -> tuple[float, float]:
    """(per vCPU-hour, per GiB-hour) that add up to ``usd`` for the instance, in OpenCost's CPU:RAM ratio."""
    gib = memory_mib / 1024
    ram = usd / (vcpus * OPENCOST_CPU_PER_GIB_RATIO + gib)
    return ram * OPENCOST_CPU_PER_GIB_RATIO, ram


def default_prices(
    cfg: PlatformConfig, table: PriceTable, facts: RegionFacts, prices: NodePrices, cpu_pools: Sequence[str]
) -> DefaultPrices:
    """CPU and RAM: the On-Demand (and Spot) price of the first of ``cpu_pools`` (the system pools) that the
    table prices, split in OpenCost's CPU:RAM ratio; GPU: the dearest per-GPU price of the stack's node
    prices. Without a priced pool of either kind, OpenCost's own defaults (configs/default.json)."""
    look = Lookup(table, cfg.region)
    # OpenCost's own defaults (configs/default.json), where the table prices no pool of the stack
    cpu, ram, spot_cpu, spot_ram, gpu = 0.031611, 0.004237, 0.006655, 0.000892, 0.95
    sources = {"CPU": OPENCOST_DEFAULTS, "GPU": OPENCOST_DEFAULTS}
    for name in cpu_pools:
        it = cfg.node_pools[name].instance_type
        od = look.instance(it, Option.on_demand)
        if od.usd is None or it not in facts.instances:
            continue
        f = facts.instances[it]
        cpu, ram = _split(od.usd, f.vcpus, f.memory_mib)
        spot = look.instance(it, Option.spot)
        spot_cpu, spot_ram = _split(spot.usd, f.vcpus, f.memory_mib) if spot.usd is not None else (cpu, ram)
        sources["CPU"] = f"{od.label} ({od.source}), {spot.label} ({spot.source}); {CPU_PRICE_SOURCE}"
        break
    gpu_rows = [r for r in prices.rows if r.gpus > 0]
    if gpu_rows:
        dearest = max(gpu_rows, key=lambda r: (r.usd / r.gpus, r.instance_type))
        gpu = dearest.usd / dearest.gpus
        sources["GPU"] = f"{dearest.label} / {dearest.gpus} GPUs ({dearest.source})"
    return DefaultPrices(cpu=cpu, ram=ram, spot_cpu=spot_cpu, spot_ram=spot_ram, gpu=gpu, sources=sources)


@dataclass(frozen=True, kw_only=True)
class OpenCostValues:
    """What the chart values depend on."""

    cluster_id: str
    prometheus_service: str
    prometheus_namespace: str
    prometheus_port: int
    monitor_labels: Mapping[str, str]
    affinity: Mapping[str, Any]
    defaults: DefaultPrices


def opencost_values(v: OpenCostValues) -> dict[str, Any]:
    """opencost/opencost-helm-chart ``charts/opencost`` 2.5.17 values (``values.yaml`` at tag
    opencost-2.5.17); unset keys keep the chart's defaults. Checked against that file in
    ``tests/infra/opencost/test_documents.py``."""
    return {
        "fullnameOverride": RELEASE,
        "clusterName": CLUSTER_DOMAIN,
        # the monitoring namespace's own NetworkPolicies apply (infra/core/namespaces.py): the chart's would
        # only add an allow for a "prometheus-system" namespace we do not have
        "networkPolicies": {"enabled": False},
        "plugins": {"enabled": False},
        "service": {"type": "ClusterIP"},
        "podSecurityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "extraVolumes": [{"name": NODE_PRICES_VOLUME, "configMap": {"name": NODE_PRICES_CONFIGMAP}}],
        "opencost": {
            "exporter": {
                # the cluster's name in OpenCost's series (cluster_id) and API
                "defaultClusterId": v.cluster_id,
                "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                # the CSV provider prices every node from our file (module docstring), never AWS's APIs
                "extraEnv": {"USE_CSV_PROVIDER": "true", "CSV_PATH": f"{NODE_PRICES_DIR}/{NODE_PRICES_KEY}"},
                "extraVolumeMounts": [
                    {"name": NODE_PRICES_VOLUME, "mountPath": NODE_PRICES_DIR, "readOnly": True}
                ],
            },
            # no agent endpoint and no second web server: Grafana is where the costs are read
            "mcp": {"enabled": False},
            "ui": {"enabled": False},
            "customPricing": {
                "enabled": True,
                "configmapName": PRICING_CONFIGMAP,
                "createConfigmap": True,
                "provider": "custom",
                "costModel": v.defaults.cost_model(),
            },
            # Cloud Costs read the account's billing export (Athena, credentials): not ours to read here
            "cloudCost": {"enabled": False},
            "carbonCost": {"enabled": False},
            "metrics": {"serviceMonitor": {"enabled": True, "additionalLabels": dict(v.monitor_labels)}},
            "prometheus": {
                "internal": {
                    "enabled": True,
                    "serviceName": v.prometheus_service,
                    "namespaceName": v.prometheus_namespace,
                    "port": v.prometheus_port,
                    "scheme": "http",
                },
                "external": {"enabled": False},
                "amp": {"enabled": False},
            },
            "affinity": dict(v.affinity),
        },
    }
