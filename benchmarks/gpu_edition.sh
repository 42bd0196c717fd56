#!/usr/bin/env bash
# The whole paper edition re-trained on one GPU, judged against the shipped CPU runs
# (issue 50): run on a CUDA machine from the repository's root, as
#   OUT=<folder> benchmarks/gpu_edition.sh [WORKERS] [ENSEMBLE] [SECONDS]
# The shipped data need not be there: the CPU edition's classes and verdicts come from
# benchmarks/results/cpu-edition.json (`markovlib edition judge`). Training stops after
# SECONDS (SIGINT: finished ensembles kept) and what was trained is judged.
set -u
workers=${1:-12}; ensemble=${2:-32}; seconds=${3:-420}
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
out=${OUT:-benchmarks/results}
device=${DEVICE:-cuda}   # DEVICE=cpu ONLY=<group prefix> try the script on a CPU
only=${ONLY:+--only $ONLY}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
python3 -c "import torch, pandas, pyarrow, scipy; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
timeout -s INT -k 120 "$seconds" python3 -m markovlib edition retrain --device "$device" $only \
  --workers "$workers" --ensemble "$ensemble" --results ${RESULTS:-/tmp/gpu-edition} \
  --against benchmarks/results/cpu-edition.json --report "$out/gpu-edition.json"
status=$?
nvidia-smi --query-gpu=memory.used --format=csv,noheader || true
exit $status
