"""Record what the pinned vLLM accepts and emits, from that version's own source, as test data.

    python tests/infra/inference/data/record_vllm.py <unpacked vllm wheel> <version>

(``pip download --no-deps vllm==<version>`` and unzip the wheel.) Writes
``tests/infra/inference/data/vllm-serve-flags.txt`` (every option ``vllm serve`` registers: the literal
``--x`` strings of ``add_argument`` calls in ``vllm/engine/arg_utils.py`` and
``vllm/entrypoints/common/cli_args.py``, plus the ``--<field>`` options ``BaseFrontendArgs``/``FrontendArgs``
generate from their fields; not the ``--no-x``/``--disable-x`` negations argparse adds to boolean flags)
and ``tests/monitoring/emitted/vllm.txt`` (the Prometheus sample names of every
``Gauge``/``Counter``/``Histogram`` ``vllm/v1/metrics/loggers.py`` creates), and
``tests/infra/inference/data/vllm-auth.txt`` (the two source lines the authentication design rests on:
``FrontendArgs.api_key``'s type, several keys, and the middleware's ``GUARDED_PREFIX``), and
``trainer/release/data/vllm-lora-architectures.txt`` (those whose model class supports LoRA adapters, and the
values ``--max-lora-rank`` takes),
``trainer/release/data/vllm-architectures.txt`` (the causal-LM ``architectures`` the model registry serves,
which the
release publisher accepts, and those it served once and no longer does; see ``architectures``). Pure
``ast``: vLLM is not imported (it needs CUDA torch).
"""

from __future__ import annotations

import ast
import hashlib
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[3]
FLAG_FILES = ("vllm/engine/arg_utils.py", "vllm/entrypoints/common/cli_args.py")
FRONTEND_CLASSES = ("BaseFrontendArgs", "FrontendArgs")
METRICS_FILE = "vllm/v1/metrics/loggers.py"
AUTH_LINES = {
    "vllm/entrypoints/common/cli_args.py": "    api_key: ",
    "vllm/entrypoints/serve/middleware/authenticate.py": "GUARDED_PREFIX = ",
}
REGISTRY_FILE = "vllm/model_executor/models/registry.py"
# The registry's text-generation table, and the architectures it serves through its Transformers backend
# as causal LMs (the other entries of that table are multimodal); both are what `vllm serve --model <dir>`
# runs for a text-only Hugging Face folder.
TEXT_TABLE = "_TEXT_GENERATION_MODELS"
TRANSFORMERS_TABLE = "_TRANSFORMERS_SUPPORTED_MODELS"
TRANSFORMERS_CAUSAL = ("TransformersForCausalLM", "TransformersMoEForCausalLM")
REMOVED_TABLE = "_PREVIOUSLY_SUPPORTED_MODELS"
MODELS_DIR = "vllm/model_executor/models"
LORA_INTERFACE = "SupportsLoRA"
LORA_CONFIG = "vllm/config/lora.py"
# Sample names prometheus_client exposes per metric type (its exposition format).
SUFFIXES = {
    "_gauge_cls": ("",),
    "_counter_cls": ("_total", "_created"),
    "_histogram_cls": ("_bucket", "_count", "_sum", "_created"),
}


def flags(root: Path) -> set[str]:
    out: set[str] = set()
    for rel in FLAG_FILES:
        tree = ast.parse((root / rel).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                out |= {
                    a.value
                    for a in node.args
                    if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--")
                }
            if isinstance(node, ast.ClassDef) and node.name in FRONTEND_CLASSES:
                out |= {
                    "--" + s.target.id.replace("_", "-")
                    for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                }
    return out


def metrics(root: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse((root / METRICS_FILE).read_text())):
        kind = getattr(node.func, "attr", None) if isinstance(node, ast.Call) else None
        if kind not in SUFFIXES:
            continue
        name = next(k.value for k in node.keywords if k.arg == "name")
        if isinstance(name, ast.Constant):
            base = name.value.removesuffix("_total")
            out |= {base + s for s in SUFFIXES[kind]}
    return out


def _tables(path: Path) -> dict[str, ast.Dict]:
    out = {}
    for node in ast.parse(path.read_text()).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Dict):
            out[target.id] = node.value
    return out


def architectures(root: Path) -> tuple[list[str], dict[str, str]]:
    """(causal-LM architectures the registry serves, {architecture: last vLLM version that served it})."""
    tables = _tables(root / REGISTRY_FILE)
    served = {k.value for k in tables[TEXT_TABLE].keys if isinstance(k, ast.Constant)}
    for k, v in zip(tables[TRANSFORMERS_TABLE].keys, tables[TRANSFORMERS_TABLE].values, strict=True):
        if (
            isinstance(k, ast.Constant)
            and isinstance(v, ast.Tuple)
            and v.elts[1].value in TRANSFORMERS_CAUSAL
        ):
            served.add(k.value)
    removed = {
        k.value: v.value
        for k, v in zip(tables[REMOVED_TABLE].keys, tables[REMOVED_TABLE].values, strict=True)
        if isinstance(k, ast.Constant) and isinstance(v, ast.Constant) and k.value not in served
    }
    return sorted(served), dict(sorted(removed.items()))


def lora_architectures(root: Path, served: list[str]) -> list[str]:
    """The served architectures whose model class supports LoRA adapters: ``SupportsLoRA``
    (vllm/model_executor/models/interfaces.py) among its bases, followed through the models package."""
    models = root / MODELS_DIR
    bases: dict[tuple[str, str], list[str]] = {}  # (module, class) -> base class names
    where: dict[str, str] = {}  # class -> the first module defining it
    for f in sorted(models.rglob("*.py")):
        module = f.parent.name if f.stem == "__init__" else f.stem
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ClassDef):
                names = [b.value if isinstance(b, ast.Subscript) else b for b in node.bases]
                bases[(module, node.name)] = [getattr(b, "id", None) or getattr(b, "attr", "") for b in names]
                where.setdefault(node.name, module)

    def lora(module: str, cls: str, seen: frozenset[tuple[str, str]] = frozenset()) -> bool:
        key = (module, cls) if (module, cls) in bases else (where.get(cls, ""), cls)
        if key in seen or key not in bases:
            return False
        return any(b == LORA_INTERFACE or lora(key[0], b, seen | {key}) for b in bases[key])

    tables = _tables(root / REGISTRY_FILE)
    out = set()
    for table in (TEXT_TABLE, TRANSFORMERS_TABLE):
        for k, v in zip(tables[table].keys, tables[table].values, strict=True):
            named = isinstance(k, ast.Constant) and k.value in served and isinstance(v, ast.Tuple)
            if named and lora(v.elts[0].value, v.elts[1].value):
                out.add(k.value)
    return sorted(out)


def max_lora_ranks(root: Path) -> list[int]:
    """The values ``--max-lora-rank`` takes: ``MaxLoRARanks = Literal[...]`` of vllm/config/lora.py."""
    for node in ast.parse((root / LORA_CONFIG).read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "MaxLoRARanks":
            return [e.value for e in node.value.slice.elts]  # type: ignore[attr-defined]
    raise SystemExit(f"no MaxLoRARanks in {LORA_CONFIG}")


def main(root: Path, version: str) -> None:
    head = (
        f"# vLLM {version} (PyPI wheel vllm-{version}), recorded by tests/infra/inference/data/record_vllm.py"
    )
    (HERE / "vllm-serve-flags.txt").write_text(
        f"{head}\n# from {', '.join(FLAG_FILES)} ({', '.join(FRONTEND_CLASSES)} fields)\n"
        + "".join(f"{f}\n" for f in sorted(flags(root)))
    )
    (REPO / "tests" / "monitoring" / "emitted" / "vllm.txt").write_text(
        f"{head}\n# from {METRICS_FILE} (prometheus_client sample names per metric type)\n"
        + "".join(f"{m}\n" for m in sorted(metrics(root)))
    )
    lines = [head]
    for rel, start in AUTH_LINES.items():
        (line,) = [ln for ln in (root / rel).read_text().splitlines() if ln.startswith(start)]
        lines.append(f"{rel}: {line.strip()}")
    (HERE / "vllm-auth.txt").write_text("\n".join(lines) + "\n")
    served, removed = architectures(root)
    sha = hashlib.sha256((root / REGISTRY_FILE).read_bytes()).hexdigest()
    (REPO / "trainer" / "release" / "data" / "vllm-architectures.txt").write_text(
        f"{head}\n# from {REGISTRY_FILE} (sha256 {sha}): the keys of {TEXT_TABLE}, and of "
        f"{TRANSFORMERS_TABLE}\n# served as {' / '.join(TRANSFORMERS_CAUSAL)}: one 'serves <architecture>' "
        f"line each;\n# 'removed <architecture> <last version>' from {REMOVED_TABLE}.\n"
        + "".join(f"serves {a}\n" for a in served)
        + "".join(f"removed {a} {v}\n" for a, v in removed.items())
    )
    (REPO / "trainer" / "release" / "data" / "vllm-lora-architectures.txt").write_text(
        f"{head}\n# the served architectures whose model class has {LORA_INTERFACE} among its bases "
        f"({MODELS_DIR}/,\n# followed through the package): vLLM serves LoRA adapters on these only.\n"
        + f"# --max-lora-rank takes (MaxLoRARanks of {LORA_CONFIG}):\n"
        + f"max-lora-rank {' '.join(map(str, max_lora_ranks(root)))}\n"
        + "".join(f"lora {a}\n" for a in lora_architectures(root, served))
    )


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
