"""``aiplat facts``: refresh the data the offline plan reads. ``refresh --region R``: a region's AWS facts
(your credentials) into a dated file the plan uses for that region instead of moto's bundled snapshot;
``upstream``: the facts kept from upstream repositories (the EFA device plugin's instance list, the load
balancer controller's IAM policy) into their data files."""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from rich.console import Console

from infra.cli.common import EXIT_AWS, EXIT_CONFIG, EXIT_DATA, EXIT_OK
from infra.io.facts_file import FACTS_DIR_ENV, facts_dir


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "facts",
        help="refresh the facts the offline plan reads: AWS's per region, the charts' from upstream",
        description="The offline plan answers AWS data calls from moto's bundled snapshot unless a "
        "refreshed facts file covers the stack's region: facts/<region>.json at the project root (or in "
        f"${FACTS_DIR_ENV}). Fact-based refusals name the data that answered and its date. The EKS add-on "
        "builds (aiplat addon-versions), prices (aiplat prices refresh) and chart image digests (aiplat "
        "images resolve) have their own commands.",
    )
    actions = p.add_subparsers(dest="facts_command", required=True, metavar="<action>")
    refresh = actions.add_parser(
        "refresh",
        help="read a region's facts from EC2 (read-only) into facts/<region>.json",
        description="Read-only EC2 calls with your AWS credentials (AWS_PROFILE, SSO, AWS_ENDPOINT_URL): "
        "DescribeAvailabilityZones, DescribeInstanceTypeOfferings (region and availability-zone) and "
        "DescribeInstanceTypes, paginated; written with the date and the endpoint that answered. "
        "Exit 0, 2 for a bad argument, 6 when AWS cannot be reached or refuses the credentials.",
    )
    refresh.add_argument("--region", required=True, help="AWS region, e.g. eu-west-1")
    refresh.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help=f"folder for <region>.json (default: ${FACTS_DIR_ENV}, else facts/ at the project root)",
    )
    refresh.set_defaults(run=run)
    up = actions.add_parser(
        "upstream",
        help="record the EFA device plugin's instance list and the load balancer controller's IAM policy "
        "from their upstream repositories",
        description="Reads, at the commit a ref resolves to on GitHub: aws/eks-charts "
        "stable/aws-efa-k8s-device-plugin (Chart.yaml version and values.yaml supportedInstanceLabels) into "
        "infra/core/data/efa_device_plugin.json, made the default chart version; "
        "kubernetes-sigs/aws-load-balancer-controller docs/install/iam_policy.json at a tag (the chart's "
        "appVersion) into infra/services/data/lbc_iam_policy.json. Each written with its source (the commit) "
        "and the date. Review the diff, then `aiplat plan`. Exit 0, 2 for a bad argument, 3 when upstream "
        "cannot be read or its file is not what was expected.",
    )
    up.add_argument("--efa-device-plugin", metavar="REF", help="aws/eks-charts branch, tag or commit")
    up.add_argument("--load-balancer-controller", metavar="TAG", help="controller release tag, e.g. v3.5.0")
    up.add_argument("--out-dir", type=Path, default=None, help="write the data files here (default: shipped)")
    up.add_argument("--github-api", default=None, help="GitHub API base URL (a mirror; default GitHub's)")
    up.add_argument("--github-raw", default=None, help="raw file base URL (a mirror; default GitHub's)")
    up.set_defaults(run=run_upstream)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from infra.io.aws_live import boto3_clients, unreadable
    from infra.io.facts_file import write_facts_file
    from infra.io.facts_refresh import read_region_snapshot
    from infra.io.regions import known_regions

    regions = known_regions()
    if args.region not in regions:
        close = difflib.get_close_matches(args.region, sorted(regions), n=3)
        hint = f"did you mean {', '.join(close)}?" if close else "use an AWS region name such as eu-west-1"
        err.print(f"error: --region: {args.region!r} is not an AWS region; fix: {hint}", markup=False)
        return EXIT_CONFIG
    try:
        with console.status(f"reading {args.region}'s zones, instance types and offerings ..."):
            facts = read_region_snapshot(boto3_clients()("ec2", args.region), args.region)
    except (ClientError, BotoCoreError) as exc:
        what = unreadable(
            "ec2:DescribeAvailabilityZones/DescribeInstanceTypeOfferings/DescribeInstanceTypes", exc
        )
        err.print(
            f"error: {what}; fix: sign in with credentials allowed to call these read-only APIs in "
            f"{args.region} (aws sso login, AWS_PROFILE) and run again",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return EXIT_AWS
    path = write_facts_file(facts, args.out_dir or facts_dir())
    console.print(
        f"wrote {path}: {len(facts.zones)} zones, {len(facts.instance_types)} instance types, "
        f"{len(facts.region_offerings)} offered in {args.region} (read {facts.fetched_at:%Y-%m-%d %H:%M} UTC "
        f"from {facts.endpoint}); the offline plan now uses it for {args.region}",
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_OK


def run_upstream(args: argparse.Namespace, console: Console, err: Console) -> int:
    import datetime

    from infra.core.instance_types import EFA_PLUGIN_FILE
    from infra.ops import upstream
    from infra.services.documents.lbc_iam import POLICY_FILE

    if not (args.efa_device_plugin or args.load_balancer_controller):
        err.print(
            "error: nothing to read; fix: give --efa-device-plugin REF and/or --load-balancer-controller TAG",
            markup=False,
        )
        return EXIT_CONFIG
    github = upstream.GitHub(
        api=args.github_api or upstream.GITHUB_API, raw=args.github_raw or upstream.GITHUB_RAW
    )
    today = datetime.date.today()
    try:
        if args.efa_device_plugin:
            version, entry = upstream.efa_plugin_entry(github, args.efa_device_plugin, today)
            path = args.out_dir / EFA_PLUGIN_FILE.name if args.out_dir else EFA_PLUGIN_FILE
            if args.out_dir and not path.exists():
                path.write_text(EFA_PLUGIN_FILE.read_text())
            added, dropped = upstream.record_efa_plugin(path, version, entry)
            console.print(
                f"wrote {path}: chart {version} (default), {len(entry['instance_types'])} instance types "
                f"({len(added)} added, {len(dropped)} dropped), from {entry['source']}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        if args.load_balancer_controller:
            document = upstream.lbc_policy_document(github, args.load_balancer_controller, today)
            path = args.out_dir / POLICY_FILE.name if args.out_dir else POLICY_FILE
            if args.out_dir and not path.exists():
                path.write_text(POLICY_FILE.read_text())
            before, changed = upstream.record_lbc_policy(path, document)
            console.print(
                f"wrote {path}: {before} -> {document['tag']}, policy "
                f"{'changed (review the diff)' if changed else 'unchanged'}, from {document['source']}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
    except upstream.UpstreamError as exc:  # unreadable, or not the file the data needs
        err.print(
            f"error: {exc}; fix: check the ref or tag exists upstream and GitHub is reachable",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return EXIT_DATA
    console.print("review the diff (git diff), then `aiplat plan --stack <stack>`", markup=False)
    return EXIT_OK
