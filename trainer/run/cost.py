"""What an attempt cost: its GPU hours x the hourly price of one GPU of the node type and purchase option it
ran on (the node's price / the node's GPUs: a job pays its share of the nodes it held).

The pod cannot see its node's instance type (the downward API reads no node labels, and IMDS is out of a
pod's reach: hop limit 1 and the namespaces' NetworkPolicies), so the training runtime tells it: every pod
of the runtime's pool gets ``$AIPLAT_PRICE``, one JSON object with the pool, its instance type, capacity type
and the purchase option it is billed as, the region, the node's GPUs and the node-hour price from the
platform's price table with its source (``infra/cost/runs.py`` ``pool_price``; ``usd_per_node_hour`` is
``null`` with the reason in ``note`` when the table lacks the price). ``attempt_cost`` turns it and the
attempt's GPU hours into the ``cost`` of a run record (``trainer/run/runrecord.py``); a team's own code
calls it too (docs/platform/job-contract.md). ``aiplat cost --team`` sums these numbers. Torch-free.
"""

from __future__ import annotations

import json
import os
from typing import Any

PRICE_ENV = "AIPLAT_PRICE"
# what the record keeps of $AIPLAT_PRICE (the rest is the cost itself)
PRICE_FIELDS = (
    "pool",
    "instance_type",
    "capacity_type",
    "purchase_option",
    "region",
    "node_gpus",
    "usd_per_node_hour",
    "source",
    "source_kind",
    "source_url",
    "note",
    "prices_read",
)
NO_PRICE = (
    f"the pod has no ${PRICE_ENV} (not started by the platform's training runtime, or a runtime deployed "
    "before it had one)"
)


def node_price(environ: dict[str, str] | None = None) -> tuple[dict[str, Any] | None, str]:
    """(``$AIPLAT_PRICE`` parsed, "") or (None, why not)."""
    raw = (os.environ if environ is None else environ).get(PRICE_ENV, "")
    if not raw:
        return None, NO_PRICE
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        return None, f"${PRICE_ENV} is not JSON ({exc})"
    if not isinstance(doc, dict) or not isinstance(doc.get("node_gpus"), int) or doc["node_gpus"] < 1:
        return None, f"${PRICE_ENV} has no node_gpus (a positive integer): {raw[:200]}"
    return doc, ""


def attempt_cost(gpu_hours: float | None, environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The ``cost`` of a run record: where the attempt ran and at what price (from ``$AIPLAT_PRICE``), its
    GPU hours, ``usd_per_gpu_hour`` (node price / node GPUs) and ``usd`` (GPU hours x that); ``usd`` is None
    and ``unknown`` says why when the price or the GPU hours are not known."""
    price, why = node_price(environ)
    out: dict[str, Any] = {k: (price or {}).get(k) for k in PRICE_FIELDS}
    node_usd = out["usd_per_node_hour"]
    per_gpu = None if price is None or node_usd is None else node_usd / price["node_gpus"]
    out.update(usd_per_gpu_hour=per_gpu, gpu_hours=gpu_hours, usd=None, unknown=None)
    if price is None:
        out["unknown"] = why
    elif per_gpu is None:
        out["unknown"] = f"no price for {price.get('instance_type')} {price.get('purchase_option')}: " + (
            price.get("note") or "not in the price table"
        )
    elif gpu_hours is None:
        out["unknown"] = "no GPU hours yet (the attempt has not ended)"
    else:
        out["usd"] = round(gpu_hours * per_gpu, 6)
    return out
