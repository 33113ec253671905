# shellcheck shell=bash
# Sourced by the GPU check scripts (cuda-check.sh, cuda-train-check.sh,
# nccl-check.sh) with their arguments [SOURCE_DIR] [BUILD_DIR] [LOG_DIR]:
# sets src, build and logs, unpacks DEPS_DIR (cuda-deps.sh), and defines
# gpu_build, the configure-build-report step they share.
src=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)
build=${2:-$src/build-cuda}
logs=${3:-$build/logs}
mkdir -p "$logs"
source "$(dirname "${BASH_SOURCE[0]}")/cuda-deps.sh"

# gpu_build NAME "MORE CONFIGURE ARGS" TARGET...: configures $build with
# the cuda backend for sm_90a (machine code plus PTX) and builds the targets
# with every core, the output in $logs/NAME.log; prints its errors and
# warnings (and NCCL's configure line), and ends the script when it fails.
gpu_build() {
  local name=$1 more=$2
  shift 2
  # $more is split into words on purpose: several -D arguments.
  # shellcheck disable=SC2086
  {
    cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSSM_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES=90a -DSSM_PYTHON=OFF $more &&
    cmake --build "$build" -j"$(nproc)" --target "$@"
  } > "$logs/$name.log" 2>&1
  local status=$?
  grep -E "NCCL:|error|warning" "$logs/$name.log" | head -60
  [ $status -eq 0 ] || { echo "$name failed ($status)"; tail -40 "$logs/$name.log"; exit $status; }
  echo "$name ok"
}

# gpu_check_start: the device's name (also into $logs/device.log), then
# the program, the GPU tests and the benchmarks built; sets ssm to the
# program. The decode check scripts start with it.
gpu_check_start() {
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$logs/device.log"
  gpu_build build "-DSSM_BUILD_TESTS=ON -DSSM_BUILD_BENCH=ON" ssm_cli test_ops_gpu test_model_gpu
  ssm=$build/bin/ssm
}

# bench_models SSM: the three 130m-shaped bench models (bench/configs, BF16
# weights, random) in $models, made once per machine; fails if one can't be.
models=/tmp/ssm-bench-models
bench_models() {
  local m status=0
  for m in mamba2 mamba3_siso mamba3_mimo4; do
    [ -d "$models/$m" ] || "$1" init --config "$src/bench/configs/${m}_130m.json" --out "$models/$m" \
      --dtype bf16 > /dev/null || status=1
  done
  return $status
}
