"""AWS region names, from botocore's endpoint data (the list the AWS CLI uses).

Read at plan time and under ``pulumi up`` (botocore comes with boto3, a base dependency), so a misspelt
region is refused before any provider is configured for it.
"""

from __future__ import annotations

from functools import cache


@cache
def known_regions() -> frozenset[str]:
    """Commercial AWS regions that have EC2."""
    import botocore.session

    return frozenset(botocore.session.get_session().get_available_regions("ec2"))
