#!/usr/bin/env bash
# The GPU check: run it in one go on a Linux machine with an NVIDIA GPU (about 7 minutes, at
# most 10, on 16 cores: the CUDA build of llama.cpp is 3.5 of them).
#
#   echo /.gpukit/ >> "$(git rev-parse --git-common-dir)/info/exclude"; cp -r ../shared/gpu .gpukit
#   bash packaging/gpu-check.sh [REPORT_DIR]          (default: gpu-report/, or $OUT if set)
#
# It uses the GPU kit in .gpukit/ (see its README: a CUDA build of llama-cpp-python 0.3.36's
# llama.cpp plus llama-bench, and two synthetic models with SmolLM2's tokenizer: /tmp/syn135.gguf
# shaped like SmolLM2-135M and /tmp/syn1700.gguf like SmolLM2-1.7B), then:
#   1. `ember doctor`: llama.cpp's backends and devices, and whether it offloads;
#   2. the GPU-marked tests (pytest -m gpu): load with offload, the CPU's greedy reply,
#      cancel, grammar; again per GPU module (libggml-cuda.so, libggml-vulkan.so) in a build that
#      has them beside the CPU variants, with that module's device forced (EMBER_GPU_DEVICE);
#   3. `ember bench` with every layer on the GPU on both synthetic models, with native
#      llama-bench interleaved at the same KV depth (engine_vs_native_tps_ratio);
# and writes REPORT_DIR/report.md (plus the raw outputs). Exit status 0 when every step passed.
set -uo pipefail

cd "$(dirname "$0")/.."
KIT=.gpukit
REPORT=${1:-${OUT:-gpu-report}}
RUNS=${EMBER_GPU_RUNS:-5}
if [[ ! -f "$KIT/gpu-run.sh" ]]; then
  echo "gpu-check.sh: no GPU kit in $KIT/; copy it first:" >&2
  echo "  echo /.gpukit/ >> \"\$(git rev-parse --git-common-dir)/info/exclude\"; cp -r ../shared/gpu .gpukit" >&2
  exit 2
fi
mkdir -p "$REPORT"
REPORT=$(cd "$REPORT" && pwd)

# Runs inside the kit's environment (CUDA llama.cpp on LLAMA_CPP_LIB_PATH, the project on PYTHONPATH).
read -r -d '' INNER <<EOF
set -u
status=0
py=\${PYTHON:-python3}
timeout 60 \$py -m desktop doctor > "$REPORT/doctor.txt" 2>&1 || status=1
cat "$REPORT/doctor.txt"
# The kit's machine has no pytest-qt/pytest-timeout: drop the project's strict addopts there.
# -p loads llama.cpp before any pytest plugin can import numpy (see engine/llama/llama_first.py).
timeout 240 \$py -m pytest -o addopts="" -p engine.llama.llama_first -p no:cacheprovider -q -m gpu tests/test_gpu.py > "$REPORT/pytest.txt" 2>&1 || status=1
tail -15 "$REPORT/pytest.txt"
# Each GPU module beside the CPU variants (#35): the same tests with that module's best device forced.
for module in cuda vulkan; do
  ls "\${LLAMA_CPP_LIB_PATH:-/nonexistent}"/libggml-\$module.so >/dev/null 2>&1 || { echo "no \$module module"; continue; }
  EMBER_GPU_DEVICE=\$module timeout 60 \$py -m desktop doctor > "$REPORT/doctor-\$module.txt" 2>&1 || status=1
  grep "^GPU:" "$REPORT/doctor-\$module.txt"
  EMBER_GPU_DEVICE=\$module timeout 240 \$py -m pytest -o addopts="" -p engine.llama.llama_first -p no:cacheprovider \
    -q -m gpu tests/test_gpu.py > "$REPORT/pytest-\$module.txt" 2>&1 || status=1
  tail -3 "$REPORT/pytest-\$module.txt"
done
for m in syn135 syn1700; do
  echo "[\$(date +%T)] ember bench on \$m"
  timeout 200 \$py -m tests.bench --json --model /tmp/\$m.gguf --gpu-layers -1 --llama-bench /tmp/b/bin/llama-bench \
    --runs $RUNS --max-tokens 128 --gui-tokens 0 --filter-bytes 100000 --history-messages 1000 \
    > "$REPORT/bench-\$m.json" 2> "$REPORT/bench-\$m.log" || { status=1; tail -5 "$REPORT/bench-\$m.log"; }
done
# The same bench with sampling on the CPU (EMBER_DEVICE_SAMPLING=0), for the 1.7B shape: what sampling
# inside the GPU graph is worth.
EMBER_DEVICE_SAMPLING=0 timeout 200 \$py -m tests.bench --json --model /tmp/syn1700.gguf --gpu-layers -1 \
  --llama-bench /tmp/b/bin/llama-bench --runs $RUNS --max-tokens 128 --gui-tokens 0 --filter-bytes 100000 \
  --history-messages 1000 > "$REPORT/bench-syn1700-cpu-sampling.json" 2>/dev/null || status=1
\$py packaging/gpu_report.py "$REPORT" > "$REPORT/report.md" || status=1
cat "$REPORT/report.md"
exit \$status
EOF

# The kit writes its models with the `gguf` package from llama.cpp's own sources.
export PYTHONPATH=/tmp/w/vendor/llama.cpp/gguf-py${PYTHONPATH:+:$PYTHONPATH}
bash "$KIT/gpu-run.sh" "$KIT" "$INNER"
