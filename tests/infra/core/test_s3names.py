"""Bucket-name rules, table-tested against the rules in the S3 user guide."""

from __future__ import annotations

import pytest

from infra.core import s3names
from infra.io.regions import known_regions


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("ab", "is 2 characters long (S3 allows 3 to 63)"),
        ("a" * 64, "is 64 characters long (S3 allows 3 to 63)"),
        ("My-Bucket", "contains 'B', 'M' (S3 allows only lower-case letters"),
        ("data_sets", "contains '_'"),
        ("-datasets", "must begin and end with a lower-case letter or a digit"),
        ("datasets-", "must begin and end with a lower-case letter or a digit"),
        ("data..sets", "contains two adjacent periods"),
        ("192.168.5.4", "is formatted as an IP address"),
        ("xn--datasets", "starts with 'xn--', a prefix S3 reserves"),
        ("sthree-datasets", "starts with 'sthree-', a prefix S3 reserves"),
        ("amzn-s3-demo-bucket", "starts with 'amzn-s3-demo-', a prefix S3 reserves"),
        ("models-s3alias", "ends with '-s3alias', a suffix S3 reserves"),
        ("models--ol-s3", "ends with '--ol-s3', a suffix S3 reserves"),
        ("models.mrap", "ends with '.mrap', a suffix S3 reserves"),
        ("models--x-s3", "ends with '--x-s3', a suffix S3 reserves"),
        ("models--table-s3", "ends with '--table-s3', a suffix S3 reserves"),
    ],
)
def test_s3_rejects(name: str, problem: str) -> None:
    problems = s3names.s3_problems(name)
    assert any(p.startswith(problem) for p in problems), problems
    fixed = s3names.suggest(name)
    assert s3names.project_problems(fixed) == [], (name, fixed)


@pytest.mark.parametrize(
    "name", ["abc", "a" * 63, "my-bucket-1", "0datasets9", "aiplat-prod-us-east-1-artifacts"]
)
def test_s3_accepts(name: str) -> None:
    assert s3names.s3_problems(name) == []
    assert s3names.project_problems(name) == []


def test_dots_are_legal_for_s3_but_not_here() -> None:
    assert s3names.s3_problems("my.bucket") == []
    assert s3names.project_problems("my.bucket") == [
        "contains '.' (dotted names break TLS to virtual-hosted-style S3 endpoints)"
    ]


@pytest.mark.parametrize("purpose", ["datasets", "checkpoints", "artifacts", "access-logs"])
def test_default_names_are_valid_in_every_region(purpose: str) -> None:
    # the longest prefix the schema allows, in every region AWS has
    prefix = "a" + "b" * 18 + "c"
    for region in sorted(known_regions()):
        for env in ("dev", "prod"):
            name = s3names.default_bucket_name(prefix, env, region, purpose)
            assert s3names.project_problems(name) == [], name
