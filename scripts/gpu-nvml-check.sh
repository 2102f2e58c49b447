#!/usr/bin/env bash
# GPU telemetry check (issue 13): NVML preflight, sampler and release wait
# against a PyTorch process that allocates a known amount of GPU memory,
# frees it and is SIGKILLed. Needs an NVIDIA driver and PyTorch; no network.
#
#   scripts/gpu-nvml-check.sh [BINARY] [-- gpu-check flags]
#
# BINARY defaults to target/release/kvcr-e2e (build it with
# `cargo build --release --bin kvcr-e2e`; it loads libnvidia-ml.so.1 at run
# time, so it builds on machines without a GPU). Output: the verdict lines on
# stdout, plus gpu-check.json and gpu-check.child.log in $OUT (default: the
# current directory). Exit 0 = PASS.
set -euo pipefail

bin=${1:-target/release/kvcr-e2e}
[[ $# -gt 0 ]] && shift
[[ ${1:-} == -- ]] && shift
out_dir=${OUT:-.}
python=${PYTHON:-python3}

if [[ ! -x $bin ]]; then
    echo "gpu-nvml-check: no harness binary at $bin (build: cargo build --release --bin kvcr-e2e)" >&2
    exit 2
fi
if ! "$python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "gpu-nvml-check: $python has no PyTorch with CUDA (set PYTHON=/path/to/python3)" >&2
    exit 2
fi

mkdir -p "$out_dir"
echo "gpu-nvml-check: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used --format=csv
"$python" -c 'import torch; print("gpu-nvml-check: torch", torch.__version__, "cuda", torch.version.cuda)'
exec "$bin" gpu-check --python "$python" --out "$out_dir/gpu-check.json" "$@"
