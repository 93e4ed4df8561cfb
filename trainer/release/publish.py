"""Publish a model release from a Hugging Face causal-LM folder (the layout: ``trainer/release/manifest.py``;
what the
folder must hold: ``trainer/release/hf_folder.py``).

    python -m trainer.release.publish --from URI --release-root URI --model-name NAME [--team TEAM] \\
        [--run-record URI] [--step N] [--signing-key KEY] [--base NAME@VERSION]

``--base``: the folder is a LoRA adapter (peft's ``save_pretrained``, trainer/release/adapter.py) for that
base release, whose signed manifest is read from ``--release-root`` and verified; the adapter release records
it by name, version and the sha256 of that manifest.

``--from`` is the folder: a team job's ``$AIPLAT_OUTPUT_URI/model/`` (``s3://<checkpoints>/<team>/outputs/
<job>/model/``), or what ``python -m trainer.export.hf`` wrote from the bundled trainer's checkpoint.
``--team`` says whose output it is: the folder must then lie under ``<team>/outputs/`` of its bucket (the
publisher's role can read only the outputs of teams with ``teams.<team>.releases: true``), the job is the
folder below it, and the job and its image come from the job's run record, never from the command line: the
newest record under ``<team>/checkpoints/<job>/run-records/`` (``$AIPLAT_CHECKPOINT_URI``, the job contract)
of a finished attempt (exit code 0) of that TrainJob, or the one ``--run-record`` names (checked the same
way); run records and outputs are written once (the bucket policy), so neither can be swapped after the
job. Every file is read by the S3 version that was current when it was listed, and the manifest records
the run record and each file's VersionId beside its sha256. ``--step`` is the training step of the weights
(the version's ``-step<N>``, default 0). ``--release-root`` is the bucket or directory whose ``release/``
prefix the inference regions read. ``--signing-key`` (default: ``AIPLAT_RELEASE_SIGNING_KEY``) is the
stack's release signing key in KMS (output ``releaseSigningKeyArn``), or ``file:<pem>`` for a local key
(tests); trainer/release/signing.py.

The folder is copied to a local temporary directory while every file is hashed, checked there from its
JSON files and safetensors headers only (nothing is unpickled, no torch, no code of the folder's runs), and
only then published from that same copy, create-only, the manifest last: a refused folder writes nothing
under ``release/``, and what was checked is what is signed. Prints one JSON line describing the release.
Exit codes: 0 published; 2 anything refused or failed (one line on stderr naming the cause; ``--debug``
shows the traceback).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from trainer.errors import BadInput, BlobExists, TrainerError
from trainer.release.adapter import ADAPTER_CONFIG, BaseRef
from trainer.release.check import copy_checked, copy_checked_adapter, open_source
from trainer.release.hf_folder import CONFIG
from trainer.release.manifest import (
    DIGEST_RE,
    JOB_RE,
    MODEL_NAME_RE,
    RELEASE_PREFIX,
    SIGNATURE,
    TEAM_RE,
    VERSION_RE,
    Release,
    ReleaseError,
    Source,
    check_model_name,
    make_version,
    manifest_bytes,
    parse_manifest,
    read_base,
    versions_store,
)
from trainer.release.signing import PUBLIC_KEY_ENV, Signer, signer_for, trusted_key
from trainer.storage.blobstore import open_blobs, split_s3_uri
from trainer.storage.hashing import MANIFEST

OUTPUTS = "outputs"  # <team>/outputs/<job>/ of the checkpoints bucket: AIPLAT_OUTPUT_URI (the env contract)


RUN_RECORDS = "run-records"  # trainer/run/runrecord.py PREFIX: <checkpoint uri>/run-records/<attempt>...json
CHECKPOINTS = "checkpoints"  # <team>/checkpoints/<job>/ of the checkpoints bucket: AIPLAT_CHECKPOINT_URI


def _team_job(from_uri: str, team: str) -> tuple[str, str]:
    """(bucket, job) of a team's output folder ``s3://<bucket>/<team>/outputs/<job>/...``."""
    if not TEAM_RE.match(team):
        raise BadInput(f"--team={team!r} is not a team name (lower-case letters, digits and '-')")
    if not from_uri.startswith("s3://"):
        raise BadInput(f"--from={from_uri}: a team's folder is read from its bucket (s3://...)")
    bucket, key = split_s3_uri(from_uri)
    parts = key.split("/")
    if len(parts) < 3 or parts[0] != team or parts[1] != OUTPUTS or not JOB_RE.match(parts[2]):
        raise BadInput(
            f"--from={from_uri} is not under {team}/{OUTPUTS}/<job>/ of its bucket: a team's releases "
            "come from its jobs' output prefix ($AIPLAT_OUTPUT_URI/model/)"
        )
    return bucket, parts[2]


def _finished(doc: dict, job: str | None) -> bool:
    exit_ = doc.get("exit") or {}
    trainjob = (doc.get("workload") or {}).get("trainjob")
    return doc.get("status") == "finished" and exit_.get("code") == 0 and (job is None or trainjob == job)


def read_run_record(records_uri: str, job: str | None, *, name: str | None = None) -> tuple[str, dict]:
    """(``<uri>?versionId=<id>``, document) of the newest run record under ``records_uri`` (or the one
    ``name``) of a finished attempt (exit code 0) of TrainJob ``job``, read by its current version."""
    store = open_blobs(records_uri)
    names = [name] if name is not None else sorted(n for n in store.list() if n.endswith(".json"))
    found: list[tuple[str, str, dict]] = []
    with tempfile.TemporaryDirectory(prefix="run-record-") as tmp:
        for n in names:
            version = store.current_version(n)
            store.download_version(n, version, Path(tmp) / "r.json")
            try:
                doc = json.loads((Path(tmp) / "r.json").read_bytes())
            except ValueError:
                continue
            if isinstance(doc, dict) and _finished(doc, job):
                where = store.url(n) + (f"?versionId={version}" if version else "")
                found.append((str(doc.get("ended_utc") or ""), where, doc))
    if not found:
        which = f"of TrainJob {job!r} " if job else ""
        raise BadInput(
            f"no run record {which}with status finished and exit code 0 under {records_uri}: a job whose "
            "output is released writes one ($AIPLAT_CHECKPOINT_URI/run-records/, the job contract)"
        )
    _, where, doc = max(found, key=lambda f: f[0])
    return where, doc


def _source(from_uri: str, team: str | None, run_record: str | None, step: int) -> Source:
    """Who the folder is from: for a team's folder the job from its path and the job and image as the job's
    run record has them; elsewhere (the bundled trainer's export) what ``run_record`` says, if given."""
    if step < 0:
        raise BadInput(f"--step={step}: a training step is 0 or more")
    job = image = where = None
    if team is not None:
        bucket, job = _team_job(from_uri, team)
        records = f"s3://{bucket}/{team}/{CHECKPOINTS}/{job}/{RUN_RECORDS}"
        name = None
        if run_record is not None:
            rb, rkey = split_s3_uri(run_record)
            folder, _, name = rkey.rpartition("/")
            if (
                rb != bucket
                or not folder.startswith(f"{team}/{CHECKPOINTS}/")
                or not folder.endswith(f"/{RUN_RECORDS}")
            ):
                raise BadInput(
                    f"--run-record={run_record} is not a run record of team {team} "
                    f"(s3://{bucket}/{team}/{CHECKPOINTS}/<job>/{RUN_RECORDS}/<attempt>...json)"
                )
            records = f"s3://{rb}/{folder}"
        where, doc = read_run_record(records, job, name=name)
    elif run_record is not None:
        folder, _, name = run_record.rpartition("/")
        where, doc = read_run_record(folder, None, name=name)
        job = (doc.get("workload") or {}).get("trainjob")
    if where is not None:
        image = doc.get("image_digest")
        if not isinstance(image, str) or not DIGEST_RE.match(image):
            raise BadInput(f"{where}: image_digest {image!r} is not the image's sha256:<64 hex> digest")
        if job is not None and not JOB_RE.match(job):
            raise BadInput(f"{where}: workload.trainjob {job!r} is not a TrainJob name")
    return Source(
        from_uri.rstrip("/") + "/",
        step,
        team=team,
        job=job,
        image_digest=image,
        run_record=where,
    )


def _base(spec: str, release_root: str, signer: Signer) -> tuple[BaseRef, bytes]:
    """The base release ``NAME@VERSION`` an adapter is for, its signed manifest verified with the release
    public key (``AIPLAT_RELEASE_PUBLIC_KEY`` where set, else the signing key's own public half)."""
    key = trusted_key() if os.environ.get(PUBLIC_KEY_ENV) else signer.public_key()
    return base_release(spec, release_root, key)


def base_release(spec: str, release_root: str, public_key: Any) -> tuple[BaseRef, bytes]:
    """The base release ``NAME@VERSION`` (``--base``) under ``<release_root>/release/``, its signed manifest
    verified with ``public_key``: the reference an adapter's manifest records and the base's ``config.json``;
    :class:`BadInput` naming ``--base`` otherwise."""
    name, _, version = spec.partition("@")
    if not MODEL_NAME_RE.match(name) or not VERSION_RE.match(version):
        raise BadInput(
            f"--base={spec!r}: name the base release as NAME@VERSION, e.g. "
            "llama-8b@20261130T101500Z-step4000 (the version folder under release/NAME/)"
        )
    try:
        return read_base(release_root, name, version, public_key)
    except ReleaseError as exc:
        raise BadInput(f"--base={spec}: {exc.reason}") from None


def publish(
    from_uri: str,
    release_root: str,
    model_name: str,
    *,
    team: str | None = None,
    run_record: str | None = None,
    step: int = 0,
    signer: Signer | None = None,
    now: datetime | None = None,
    base: str | None = None,
) -> Release:
    """Publish the Hugging Face folder at ``from_uri`` as a new version of ``model_name`` under
    ``<release_root>/release/`` and return the release written. ``signer`` signs the manifest (default:
    :func:`trainer.release.signing.signer_for` the ``AIPLAT_RELEASE_SIGNING_KEY``). Every object is created,
    never
    replaced (``If-None-Match``: the bucket policy refuses anything else under ``release/``); the files go
    up first, then ``manifest.json.sig``, ``manifest.json`` last, so a reader never accepts a release still
    being written. Refusals (:class:`~trainer.errors.BadInput`, one line) happen before anything is
    written there. ``base`` (``NAME@VERSION``): the folder is a LoRA adapter for that base release
    (trainer/release/adapter.py), published as an adapter release that names the base by the sha256 of its
    signed manifest."""
    check_model_name(model_name)
    if f"/{RELEASE_PREFIX}/" in f"/{from_uri.rstrip('/')}/":
        raise BadInput(f"--from={from_uri}: a folder under {RELEASE_PREFIX}/ is a release already")
    source = _source(from_uri, team, run_record, step)  # refusals before any file of the folder is read
    signer = signer if signer is not None else signer_for(None)
    base_ref = base_config = None
    if base is not None:
        base_ref, base_config = _base(base, release_root, signer)
    src, listing = open_source(from_uri)
    if base is None and ADAPTER_CONFIG in listing:
        raise BadInput(
            f"--from={from_uri} is a LoRA adapter ({ADAPTER_CONFIG}): name the base release it was trained "
            "on with --base NAME@VERSION"
        )
    version = make_version(step, now)
    store = versions_store(release_root, model_name).child(version)
    with tempfile.TemporaryDirectory(prefix="publish-") as tmp:
        local = Path(tmp)
        serving = adapter = None
        if base_config is not None:
            plan, files, versions, adapter = copy_checked_adapter(src, listing, local, base_config)
            adapter = dataclasses.replace(adapter, base=base_ref)
        else:
            checked = copy_checked(src, listing, local)
            plan, files, versions, serving = checked.plan, checked.files, checked.versions, checked.serving
        if store.list():
            raise BadInput(f"{store.uri} already exists; publish again a second later")
        source = dataclasses.replace(source, versions=dict(versions) or None)
        raw = manifest_bytes(
            model_name=model_name,
            version=version,
            files=files,
            source=source,
            serving=serving,
            adapter=adapter,
            created=now,
        )
        signature = signer.sign(raw)
        try:
            for name in plan.publish:
                store.upload(name, local / name, create_only=True)
            store.write(SIGNATURE, signature, create_only=True)
            store.write(MANIFEST, raw, create_only=True)
        except BlobExists:
            raise BadInput(f"{store.uri} was published concurrently; publish again") from None
        config = json.loads((local / (CONFIG if adapter is None else ADAPTER_CONFIG)).read_bytes())
    rel = parse_manifest(raw, release_root, model_name, version, store.uri)
    return dataclasses.replace(rel, config=config)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(
        prog="trainer.release.publish",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--from", dest="from_uri", required=True, metavar="URI", help="the Hugging Face folder")
    ap.add_argument("--release-root", required=True, metavar="URI", help="s3://bucket[/prefix] or a dir")
    ap.add_argument("--model-name", required=True, help="release/<model-name>/<version>/")
    ap.add_argument("--team", default=None, help="the team whose job's output it is")
    ap.add_argument(
        "--run-record",
        default=None,
        metavar="URI",
        help="the job's run record to take the job and image from (default: the newest finished one of the "
        "job under <team>/checkpoints/<job>/run-records/)",
    )
    ap.add_argument("--step", type=int, default=0, help="training step of the weights (default 0)")
    ap.add_argument(
        "--base",
        default=None,
        metavar="NAME@VERSION",
        help="the folder is a LoRA adapter (peft save_pretrained) for this base release",
    )
    ap.add_argument(
        "--signing-key",
        default=None,
        help="KMS key ARN/alias that signs the manifest, or file:<pem> (default: "
        "$AIPLAT_RELEASE_SIGNING_KEY)",
    )
    ap.add_argument("--debug", action="store_true", help="show tracebacks")
    args = ap.parse_args(argv)
    try:
        rel = publish(
            args.from_uri,
            args.release_root,
            args.model_name,
            team=args.team,
            run_record=args.run_record,
            step=args.step,
            signer=signer_for(args.signing_key),
            base=args.base,
        )
    except (TrainerError, OSError) as exc:
        if args.debug:
            raise
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    out = {
        "published": rel.uri,
        "model_name": rel.model_name,
        "version": rel.version,
        "step": rel.step,
        "source": rel.source.as_json(),
    }
    if rel.adapter is not None:
        out["adapter"] = rel.adapter.as_json()
    else:
        assert rel.serving is not None
        out |= {"architecture": rel.serving.architecture, "dtype": rel.serving.dtype,
                "parameters": rel.serving.parameters}  # fmt: skip
    print(json.dumps(out | {"bytes": sum(f.size for f in rel.files.values())}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
