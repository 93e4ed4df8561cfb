"""``aiplat release check --from FOLDER [--stack INFER_STACK]``: will the publisher accept this model folder,
and will it serve on that stack? The publisher's own folder check (every tensor name, shape and dtype
against the architecture's own model; ``infra/io/releases.py`` ``folder_facts``), then with ``--stack`` the
rollout's fit check (``infra/ops/release_check.py``) with its numbers per pool and instance type."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

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
        "model on GPUs without bfloat16 is warned about. Exit 0 accepted (and fits); 2 refused.",
    )
    c.add_argument("--from", dest="from_uri", required=True, metavar="FOLDER", help="directory or s3:// URI")
    c.add_argument("--stack", "-s", help="an infer stack whose engine settings and pools it must fit")
    c.add_argument(
        "--model",
        "-m",
        help="with --stack: the model of inference.models whose engine settings and pools it must fit "
        "(default: the stack's only model)",
    )
    c.add_argument("--stacks-dir", help="the stacks folder (default: stacks/)")
    c.add_argument("--json", action="store_true", help="one JSON object")
    c.set_defaults(run=run_check)
    release_publish.add_parser(cmds)
    release_promote.add_parsers(cmds)


def run_check(args: argparse.Namespace, console: Console, err: Console) -> int:
    from pathlib import Path

    from infra.io.releases import ReleaseUnreadable, folder_facts
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
