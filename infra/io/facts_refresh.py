"""``aiplat facts refresh``: read one region's zones, instance types and offerings from EC2 (read-only).

Three paginated Describe calls with the user's credentials, written as a dated facts file
(``infra/io/facts_file.py``) that the offline plan then reads for that region instead of moto's snapshot:

- ``DescribeAvailabilityZones``: zone names, this account's zone IDs and zone types;
- ``DescribeInstanceTypeOfferings`` with ``LocationType`` ``region`` and ``availability-zone``;
- ``DescribeInstanceTypes``: every type the region supports (the API's default), with its GPUs, EFA,
  network cards, ...

https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypeOfferings.html
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypes.html
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from infra.core.facts import AvailabilityZone
from infra.io.facts_file import FactsFile


def _offerings(ec2: Any, location_type: str) -> list[tuple[str, str]]:
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(LocationType=location_type)
    return [(o["InstanceType"], o["Location"]) for page in pages for o in page["InstanceTypeOfferings"]]


def read_region_snapshot(ec2: Any, region: str, *, now: dt.datetime | None = None) -> FactsFile:
    """What EC2 answers in ``region`` (``ec2`` is a boto3 client there), as a facts file to write.

    Raises botocore's ``ClientError``/``BotoCoreError`` as the client does; the command turns them into one
    line (``infra/io/aws_live.py:unreadable``)."""
    azs = ec2.describe_availability_zones()["AvailabilityZones"]
    zones = tuple(
        AvailabilityZone(z["ZoneName"], z["ZoneId"], z.get("ZoneType", "availability-zone"))
        for z in sorted(azs, key=lambda z: z["ZoneName"])
        if z.get("State", "available") == "available"
    )
    by_zone: dict[str, set[str]] = {}
    for itype, az in _offerings(ec2, "availability-zone"):
        by_zone.setdefault(az, set()).add(itype)
    types: dict[str, dict[str, Any]] = {}
    for page in ec2.get_paginator("describe_instance_types").paginate():
        for entry in page["InstanceTypes"]:
            types[entry["InstanceType"]] = entry
    return FactsFile(
        region=region,
        fetched_at=(now or dt.datetime.now(dt.UTC)).replace(microsecond=0),
        endpoint=str(ec2.meta.endpoint_url),
        zones=zones,
        instance_types=types,
        region_offerings=frozenset(t for t, _ in _offerings(ec2, "region")),
        zone_offerings={az: frozenset(ts) for az, ts in by_zone.items()},
    )
