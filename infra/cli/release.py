"""``aiplat release check --from FOLDER [--stack INFER_STACK]``: will the publisher accept this model folder,
and will it serve on that stack? The publisher's own folder check (every tensor name, shape and dtype
against the architecture's own model; ``infra/io/releases.py`` ``folder_facts``), then with ``--stack`` the
rollout's fit check (``infra/ops/release_check.py``) with its numbers per pool and instance type. A LoRA
adapter folder (``adapter_config.json``) gets the publisher's adapter check against ``--base NAME@VERSION``,
and with ``--stack`` the rollout's adapter check (the model's base release and ``lora.max_lora_rank``)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.table import Table

from infra.cli import release_promote, release_publish
from infra.cli.common import EXIT_CONFIG, EXIT_OK, print_error
from infra.core.errors import ConfigError, ConfigErrors

GIB = 2**30


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "release",
        help="model releases: check a folder, promote or roll back one model in the infer stacks",
        description="Model releases (docs/inference/release.md).",
    )
    cmds = p.add_subparsers(dest="release_command", required=True, metavar="<release command>")
    c = cmds.add_parser(
        "check",
        help="would the publisher accept this Hugging Face folder, and does it fit an infer stack's pools",
        description="Run the release publisher's check on a Hugging Face folder (a directory or s3:// URI) "
        "without publishing: files by name, config.json, every tensor's name, shape and dtype against the "
        "architecture's own model in the pinned transformers (any architecture the pinned vLLM serves; "
        "tied weights understood). With --stack (an infer stack): the rollout's fit check, tensor "
        "parallelism, max_model_len against the release's positions, the chat template, and weights plus "
        "one sequence's KV cache per GPU on every instance type of its pools, with the numbers; a bfloat16 "
        "model on GPUs without bfloat16 is warned about. A LoRA adapter folder (adapter_config.json) needs "
        "--base and --release-root: the publisher's adapter check against that base release (every module "
        "and shape against the base's own model), with --stack the model's base release and "
        "lora.max_lora_rank. Exit 0 accepted (and fits); 2 refused.",
    )
    c.add_argument("--from", dest="from_uri", required=True, metavar="FOLDER", help="directory or s3:// URI")
    c.add_argument("--stack", "-s", help="an infer stack whose engine settings and pools it must fit")
    c.add_argument(
        "--model",
        "-m",
        help="with --stack: the model of inference.models whose engine settings and pools it must fit "
        "(default: the stack's only model)",
    )
    c.add_argument(
        "--base", metavar="NAME@VERSION", help="an adapter folder's base release (required for one)"
    )
    c.add_argument(
        "--release-root", metavar="URI", help="with --base: where release/NAME/VERSION/ is (s3://bucket)"
    )
    c.add_argument(
        "--public-key",
        metavar="PEM",
        help="with --base: the release public key (default $AIPLAT_RELEASE_PUBLIC_KEY)",
    )
    c.add_argument("--stacks-dir", help="the stacks folder (default: stacks/)")
    c.add_argument("--json", action="store_true", help="one JSON object")
    c.set_defaults(run=run_check)
    release_publish.add_parser(cmds)
    release_promote.add_parsers(cmds)


def run_check(args: argparse.Namespace, console: Console, err: Console) -> int:
    from pathlib import Path

    from infra.io.releases import ReleaseUnreadable, folder_facts, is_adapter_folder
    from infra.io.stackfiles import load_stack_config
    from infra.ops.release_check import fit_problems, fit_rows

    try:
        cfg = None
        if args.stack is not None:
            cfg = load_stack_config(args.stack, Path(args.stacks_dir) if args.stacks_dir else None)
            if cfg.inference is None:
                raise ConfigErrors(
                    [ConfigError("--stack", f"{args.stack} serves nothing", "name an infer stack")]
                )
            models = list(cfg.inference.models)
            if args.model is None and len(models) == 1:
                args.model = models[0]
            if args.model not in models:
                raise ConfigErrors(
                    [
                        ConfigError(
                            "--model",
                            f"{args.model or 'none given'}: {args.stack} serves {', '.join(models)}",
                            f"name one of them: --model {models[0]}",
                        )
                    ]
                )
        if is_adapter_folder(args.from_uri):
            return _run_adapter(args, cfg, console, err)
        if args.base is not None:
            raise ConfigErrors(
                [ConfigError("--base", f"{args.from_uri} is no LoRA adapter folder", "leave --base out")]
            )
        facts = folder_facts(args.from_uri)
    except ConfigErrors as exc:
        print_error(err, args.stack, exc, debug=args.debug)
        return EXIT_CONFIG
    except ReleaseUnreadable as exc:  # the publisher's own refusal, word for word
        print_error(err, args.stack, ConfigErrors([ConfigError("--from", exc.reason)]), debug=args.debug)
        return EXIT_CONFIG
    problems = fit_problems(cfg, args.model, facts) if cfg is not None else []
    rows = fit_rows(cfg, args.model, facts) if cfg is not None else []
    if args.json:
        doc = {"facts": asdict(facts), "accepted": True, "stack": args.stack, "problems": problems}
        doc["fit"] = [asdict(r) for r in rows]
        console.out(json.dumps(doc, indent=1), highlight=False)
        return EXIT_CONFIG if problems else EXIT_OK
    f = facts
    console.print(
        f"accepted by the publisher's check: {f.architecture}, {f.parameters:,} parameters ({f.dtype}, "
        f"{f.weight_bytes / GIB:.2f} GiB), {f.layers} layers, {f.attention_heads} heads ({f.kv_heads} KV), "
        f"max positions {f.max_positions}, chat template {'yes' if f.chat_template else 'no'}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if cfg is None:
        return EXIT_OK
    assert cfg.inference is not None
    eng = cfg.inference.models[args.model].engine
    table = Table(
        title=f"{args.stack} {args.model}: {eng.gpus_per_pod} GPU(s) per pod, max_model_len "
        f"{eng.max_model_len}, gpu_memory_utilization {eng.gpu_memory_utilization}",
        title_justify="left",
    )
    for col in (
        "pool",
        "instance type",
        "GPU",
        "runs as",
        "weights/GPU",
        "KV cache/GPU",
        "budget/GPU",
        "fits",
    ):
        table.add_column(col)
    for r in rows:
        kv = "-" if r.kv_bytes is None else f"{r.kv_bytes / GIB:.2f} GiB"
        table.add_row(
            r.pool,
            r.instance_type,
            r.gpu_model,
            r.dtype,
            f"{r.weight_bytes / GIB:.2f} GiB",
            kv,
            f"{r.budget_bytes / GIB:.2f} GiB",
            "yes" if r.fits else "NO",
        )
    console.print(table)
    for warning in sorted({r.warning for r in rows if r.warning}):
        err.print(
            f"warning: {args.stack}: {warning}", style="yellow", markup=False, highlight=False, soft_wrap=True
        )
    for problem in problems:
        err.print(
            f"error: {args.stack}: {problem}", style="red", markup=False, highlight=False, soft_wrap=True
        )
    return EXIT_CONFIG if problems else EXIT_OK


def _run_adapter(args: argparse.Namespace, cfg: Any, console: Console, err: Console) -> int:
    """The publisher's adapter check of the folder against ``--base``, and with ``--stack`` the rollout's
    adapter check (the base the model serves, its lora.max_lora_rank); ConfigErrors / ReleaseUnreadable
    pass to the caller."""
    from infra.io.releases import adapter_folder_facts
    from infra.ops.release_check import adapter_problems

    missing = [f for f, v in (("--base", args.base), ("--release-root", args.release_root)) if v is None]
    if missing:
        raise ConfigErrors(
            [
                ConfigError(
                    missing[0],
                    f"not given: {args.from_uri} is a LoRA adapter folder (adapter_config.json), checked "
                    "against the base release it was trained on",
                    "add --base NAME@VERSION --release-root s3://<bucket with release/NAME/VERSION/>",
                )
            ]
        )
    f = adapter_folder_facts(args.from_uri, args.base, args.release_root, args.public_key)
    problems, caveats = adapter_problems(cfg, args.model, "--from", f, None) if cfg is not None else ([], [])
    if args.json:
        doc = {"adapter": asdict(f), "accepted": True, "stack": args.stack, "problems": problems}
        console.out(json.dumps({**doc, "caveats": caveats}, indent=1), highlight=False)
        return EXIT_CONFIG if problems else EXIT_OK
    console.print(
        f"accepted by the publisher's adapter check: LoRA rank {f.rank} (alpha {f.alpha:g}), {f.modules} "
        f"modules ({f.target_modules}), {f.parameters:,} {f.dtype} parameters, for base "
        f"{f.base_name}/{f.base_version} ({f.base_architecture})",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    if cfg is not None and not problems:
        assert cfg.inference is not None
        lora = cfg.inference.models[args.model].lora
        console.print(
            f"fits {args.stack} {args.model}: base release {f.base_name}/{f.base_version}, "
            f"lora.max_lora_rank {lora.max_lora_rank if lora else '-'}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    for line, style in [
        *((f"note: {c}", "yellow") for c in caveats),
        *((f"error: {p}", "red") for p in problems),
    ]:
        err.print(f"{line}", style=style, markup=False, highlight=False, soft_wrap=True)
    return EXIT_CONFIG if problems else EXIT_OK
