#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, -DSSM_FUZZ=ON) into
# BUILD_DIR (default build-fuzz) and runs each in turn on its corpus.
#   scripts/fuzz.sh --smoke             every target 30 s (CI)
#   scripts/fuzz.sh --seconds 600 pickle safetensors
# The working corpus of each target grows in BUILD_DIR/fuzz-corpus/<target>
# (seeded from fuzz/corpus/<target>, which stays as committed); crashing
# inputs land in BUILD_DIR/fuzz-artifacts/<target>/. Exit status 1 when any
# target found a crash, a leak, a timeout or ran out of memory. Extra
# libFuzzer flags go in FUZZ_ARGS (e.g. FUZZ_ARGS=-use_value_profile=1).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=300
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) seconds=30 ;;
    --seconds) seconds="$2"; shift ;;
    --seconds=*) seconds="${1#*=}" ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done
if [ ${#targets[@]} -eq 0 ]; then
  for f in fuzz/*_fuzz.cpp; do
    t=$(basename "$f" _fuzz.cpp)
    targets+=("$t")
  done
fi

build_dir=${BUILD_DIR:-build-fuzz}
CC=clang CXX=clang++ cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSSM_FUZZ=ON -DSSM_BUILD_TESTS=OFF -DSSM_BUILD_BENCH=OFF >/dev/null
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}"

status=0
summary=()
for t in "${targets[@]}"; do
  corpus="$build_dir/fuzz-corpus/$t"
  artifacts="$build_dir/fuzz-artifacts/$t"
  log="$build_dir/fuzz-logs/$t.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  dict=()
  [ -f "fuzz/dict/$t.dict" ] && dict=(-dict="fuzz/dict/$t.dict")
  echo "== fuzz_$t: ${seconds}s"
  # Leaks are checked (ASan's default); one input may take 10 s and 2 GB.
  set +e
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$build_dir/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "${dict[@]}" ${FUZZ_ARGS:-} \
    "$corpus" "fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  if [ $rc -ne 0 ]; then
    status=1
    result="FAILED (exit $rc; see $log, input in $artifacts/)"
    grep -E "^(==[0-9]+==ERROR|SUMMARY|.*runtime error)" "$log" | head -5 || true
  else
    result="ok"
  fi
  summary+=("$(printf '%-22s %6ss %12s execs  %s' "$t" "$seconds" "${execs:-?}" "$result")")
done
echo
printf '%s\n' "${summary[@]}"
exit $status
