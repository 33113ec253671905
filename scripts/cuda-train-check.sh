#!/usr/bin/env bash
# Training on the GPU, checked on a machine with an NVIDIA GPU and the CUDA
# toolkit: builds the cuda backend, runs every `gpu` test (the op tests
# against ref, forward and backward; golden gradients; CPU-vs-GPU training
# and checkpoints across devices), then `ssm bench --train` on 130m-shaped
# models unless BENCH=0.
#   scripts/cuda-train-check.sh [SOURCE_DIR] [BUILD_DIR] [LOG_DIR]
# DEPS_DIR: as scripts/cuda-check.sh (Debian packages the machine lacks).
# TESTS: a ctest -R regex to run only some gpu tests.
# CMAKE_ARGS: more configure arguments (e.g. -DSSM_NCCL=ON).
set -uo pipefail
source "$(dirname "$0")/gpu-check-common.sh"
export NCCL_NVLS_ENABLE=0  # NVLink multicast stays off on shared hosts

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$logs/device.log"
gpu_build build "-DSSM_BUILD_TESTS=ON -DSSM_BUILD_BENCH=OFF ${CMAKE_ARGS:-}" test_ops_gpu test_model_gpu ssm_cli

sstatus=0
# A session written by `ssm generate --backend cuda` continues on the CPU as
# one written on the CPU does (greedy, so the ids must be equal).
for m in mamba3_siso_tiny hybrid_tiny; do
  dir=$src/tests/golden/$m
  for first in cuda cpu; do
    rm -f /tmp/session-$first.state
    "$build/bin/ssm" generate "$dir" --backend $first --prompt-ids 1,2,3,4,5 -n 6 --temperature 0 \
      --print-ids -q --session /tmp/session-$first.state > "$logs/session-$m-$first-1.txt" 2>&1
    "$build/bin/ssm" generate "$dir" --backend cpu --prompt-ids 7,8 -n 6 --temperature 0 \
      --print-ids -q --session /tmp/session-$first.state > "$logs/session-$m-$first-2.txt" 2>&1
  done
  if cmp -s "$logs/session-$m-cuda-2.txt" "$logs/session-$m-cpu-2.txt" &&
     cmp -s "$logs/session-$m-cuda-1.txt" "$logs/session-$m-cpu-1.txt"; then
    echo "session $m: cuda -> cpu continuation equals cpu -> cpu: $(cat "$logs/session-$m-cuda-2.txt")"
  else
    echo "session $m: DIFFERS"; tail -n +1 "$logs"/session-$m-*.txt; sstatus=1
  fi
done

ctest --test-dir "$build" -L gpu ${TESTS:+-R "$TESTS"} -j4 --output-on-failure > "$logs/test.log" 2>&1
tstatus=$?
[ $sstatus -eq 0 ] || tstatus=1
grep -E "tests passed|tests failed|\*\*\*Failed|Failed  |Exception" "$logs/test.log" | head -80
tail -3 "$logs/test.log"

if [ "${BENCH:-1}" != 0 ]; then
  ssm=$build/bin/ssm
  : > "$logs/bench.log"
  for cfg in "$src"/bench/train_configs/*.json; do
    dir=/tmp/bench-$(basename "$cfg" .json)
    "$ssm" init --config "$cfg" --out "$dir" --force >> "$logs/bench.log" 2>&1 || { echo "init $cfg failed"; continue; }
    # One process per case: the peak memory counts from the process's start.
    for prec in "" --bf16; do
      for b in 8 1; do
        timeout 200 "$ssm" bench "$dir" --train $prec --backend cuda --batch "$b" -p 2048 ${BENCH_ARGS:-} \
          2>&1 | tee -a "$logs/bench.log"
      done
    done
  done
fi
if [ -n "${PROFILE:-}" ]; then  # kernel times of one 1 x 2048 training step (Nsight Compute)
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  dir=/tmp/bench-mamba2_130m
  [ -d $dir ] || "$build/bin/ssm" init --config "$src/bench/train_configs/mamba2_130m.json" --out $dir --force
  timeout 300 "$ncu" --clock-control none --csv --page raw --metrics gpu__time_duration.sum \
    --launch-skip "${PROFILE_SKIP:-0}" \
    "$build/bin/ssm" bench $dir --train --backend cuda --batch "${PROFILE_BATCH:-1}" -p 2048 --train-steps 1 \
    > "$logs/profile.csv" 2> "$logs/profile.err"
  python3 "$src/scripts/ncu-kernel-times.py" "$logs/profile.csv" 30 | tee "$logs/profile.txt"
fi
exit $tstatus
