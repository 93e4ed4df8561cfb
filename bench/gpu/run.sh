#!/usr/bin/env bash
# The one GPU check, for a machine with one NVIDIA GPU (driver for CUDA 12.8+) and PyPI access:
#
#   bash bench/gpu/run.sh            (from anywhere; WORK=<dir> to keep the files, default a new temp dir)
#
# Installs vLLM (which brings its own CUDA torch) and the trainer's other libraries into a fresh virtualenv,
# then bench/gpu/gpu_check.py trains gpt2-124m (bf16, torch.compile) and reports tokens/s and MFU, publishes
# and fetches a release, serves it with vLLM and measures 1/16/64 concurrent clients. The whole check,
# installs included, stays within 8 minutes (BUDGET_S); it prints its figures and writes figures.json.
set -euo pipefail

# vLLM: the newest release on PyPI on 2026-12-02 (`pip index versions vllm`), the version the inference
# Deployment pins. The trainer runs on the torch vLLM requires (printed below), not on the image's 2.13.0.
VLLM_VERSION=0.33.0
BUDGET_S=${BUDGET_S:-480}
START=$(date +%s)
REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${WORK:-$(mktemp -d /tmp/aiplat-gpu-XXXXXX)}
mkdir -p "$WORK"
echo "work dir: $WORK"

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

python3 -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q --disable-pip-version-check uv
# The trainer's libraries besides torch, at the trainer image's pins (images/trainer/requirements.txt).
"$WORK/venv/bin/uv" pip install -q --python "$WORK/venv/bin/python" "vllm==${VLLM_VERSION}" \
  "boto3==1.44.8" "prometheus-client==0.26.0" "safetensors==0.8.0" "cryptography==50.0.2"
"$WORK/venv/bin/python" -c 'import torch, vllm, transformers; print("torch", torch.__version__, "vllm", vllm.__version__, "transformers", transformers.__version__, "cuda", torch.cuda.is_available())'

LEFT=$((BUDGET_S - ($(date +%s) - START)))
echo "installed in $(($(date +%s) - START))s; ${LEFT}s left for the check"
cd "$REPO"
"$WORK/venv/bin/python" bench/gpu/gpu_check.py --work "$WORK" --seconds "$LEFT"
echo "total $(($(date +%s) - START))s"
