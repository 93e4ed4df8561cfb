#!/usr/bin/env bash
# The GPU check, for a machine with one NVIDIA GPU (bench/gpu/README.md):
#
#   bash bench/gpu/run.sh           (from anywhere; PYTHON=<python with torch>, default python3; WORK=<dir>;
#                                    TRAIN_BENCH_ARGS="--budget-s 240" and the like for part 1;
#                                    WHEELS=<dir of wheels> for part 3; MODELS_ONLY=1 runs part 3 alone)
#
# Needs: Python >= 3.11 and a CUDA build of torch with an NVIDIA driver new enough for its CUDA (torch cu130:
# driver >= 580.65.06; infra/pools/ami_drivers.py CUDA_MIN_DRIVER). Part 1 checks all three first and says
# which one is missing. Part 2 installs vLLM 0.33.0, which is built on CUDA 13.0 (its wheel requires torch
# 2.14.0 on nvidia-cuda-runtime 13.0; infra/pools/ami_drivers.py VLLM_CUDA): driver >= 580 as well.
#
# 1. The trainer: bench/gpu/train_bench.py, gpt2-124m bf16 + torch.compile, with the torch already there and
#    this repository alone (no installs, no network), within 5 minutes; one JSON object (tokens/s, MFU).
# 2. Serving: where vLLM ${VLLM_VERSION} is importable or a package index answers, bench/gpu/serve_bench.py
#    publishes part 1's checkpoint as a release, serves it with `vllm serve` and measures it with
#    `vllm bench serve` at 1/16/64 concurrent requests. Where neither (the lent H200 has no network), one
#    line says it was skipped and the script exits 0 with part 1's result.
# 3. Models: with the same vLLM, bench/gpu/serve_models.py serves a Llama-family release (built from a
#    config, random weights, published by trainer.release.publish) and one LoRA adapter (peft), direct and
#    through vllm-router, at 1/16/64 concurrent requests: tokens/s and p99 TTFT. It needs peft (and its
#    accelerate) and the vllm-router wheel besides vLLM: where there is no network, put their wheels in
#    WHEELS (they travel with the tree: 64 MiB at most) and they are installed from there with --no-index;
#    each part whose package is missing is skipped with one line.
set -euo pipefail

# vLLM: the version the inference Deployment pins (infra/inference/config.py VLLM_VERSION; a test ties them).
VLLM_VERSION=0.33.0
PYTHON=${PYTHON:-python3}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${WORK:-$(mktemp -d /tmp/aiplat-gpu-XXXXXX)}
mkdir -p "$WORK"
echo "work dir: $WORK" >&2

# Which way part 2 can go, decided first: part 1 then keeps its checkpoint only when part 2 will serve it.
SERVE_PY=""
if "$PYTHON" -c "import importlib.metadata as m, sys; sys.exit(m.version('vllm') != '${VLLM_VERSION}')" \
    2>/dev/null; then
  SERVE_PY=$PYTHON
  serving="vLLM ${VLLM_VERSION} is installed"
elif timeout 30 "$PYTHON" -m pip index versions vllm --retries 0 --timeout 10 >/dev/null 2>&1; then
  serving="a package index answers: installing vLLM ${VLLM_VERSION} into $WORK/venv"
else
  serving=""
fi

# Part 1: its own checks, exit codes and JSON (bench/gpu/train_bench.py --help).
if [ -z "${MODELS_ONLY:-}" ]; then
  # shellcheck disable=SC2086  # TRAIN_BENCH_ARGS is a list of options
  "$PYTHON" "$REPO/bench/gpu/train_bench.py" ${TRAIN_BENCH_ARGS:-} ${serving:+--checkpoint "$WORK/ckpt"} \
    | tee "$WORK/train.json"
fi

if [ -z "$serving" ]; then
  echo "serving skipped: vLLM ${VLLM_VERSION} is not installed and no package index answers (parts 2 and 3 need vLLM; part 1's result is above)"
  exit 0
fi
echo "serving: $serving" >&2
if [ -z "$SERVE_PY" ]; then
  "$PYTHON" -m venv "$WORK/venv"
  # vLLM brings its own CUDA torch; the release tools' libraries at the trainer image's pins
  # (images/trainer/requirements.txt; cryptography: pyproject.toml).
  "$WORK/venv/bin/python" -m pip install -q --disable-pip-version-check "vllm==${VLLM_VERSION}" \
    "boto3==1.44.8" "prometheus-client==0.26.0" "safetensors==0.8.0" "cryptography==50.0.2"
  SERVE_PY=$WORK/venv/bin/python
fi
if [ -n "${WHEELS:-}" ] && [ -d "$WHEELS" ]; then
  "$SERVE_PY" -m pip install -q --disable-pip-version-check --no-index --find-links "$WHEELS" \
    peft vllm-router || echo "wheels: peft or vllm-router did not install from $WHEELS" >&2
fi
if [ -z "${MODELS_ONLY:-}" ]; then
  "$SERVE_PY" "$REPO/bench/gpu/serve_bench.py" --checkpoint "$WORK/ckpt" --work "$WORK/serve" \
    --vllm-version "$VLLM_VERSION"
fi
"$SERVE_PY" "$REPO/bench/gpu/serve_models.py" --work "$WORK/models" --vllm-version "$VLLM_VERSION"
