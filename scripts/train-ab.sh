#!/usr/bin/env bash
# Alternates two train_bench binaries (A = the baseline, B = the build under
# test) for ROUNDS rounds and prints each run's figures and the median over
# rounds of B's tokens/s over A's, the ratio issue 13's training target is
# stated in. On a shared machine one run of a binary spreads by 10-30% and
# an idle pair by up to half (docs/CPU.md, "## Training"), so a single pair
# shows little; alternating keeps both binaries under the same drift, and
# the median of the per-round ratios drops a round that one run spoiled.
#
#   scripts/train-ab.sh /tmp/train_bench_8d7cd74 build/bench/train_bench [ROUNDS] [FILTER]
#
# ROUNDS defaults to 3, FILTER to BM_TrainStep130m/24/ (130m Mamba-2, 4 x 512).
# Each run's load average is printed before it starts: say it with the figures.
set -euo pipefail
if [[ $# -lt 2 ]]; then
  sed -n 2,13p "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
a=$1 b=$2 rounds=${3:-3} filter=${4:-BM_TrainStep130m/24/}
for bin in "$a" "$b"; do
  [[ -x $bin ]] || { echo "not an executable: $bin" >&2; exit 2; }
done

# One run: prints "tokens_per_s cpu_s_per_step" ('-' where the bench has no
# such counter).
run_one() {
  local out tok cpu
  out=$("$1" --benchmark_filter="$filter" 2>&1 | grep '^BM_' | head -n 1) || true
  tok=$(grep -o 'tokens/s=[0-9.e+]*' <<<"$out" | cut -d= -f2) || true
  cpu=$(grep -o 'cpu_s/step=[0-9.e+]*' <<<"$out" | cut -d= -f2) || true
  echo "${tok:--} ${cpu:--}"
}

ratios=()
printf '%-5s %-4s %-8s %-16s %12s %12s\n' round bin start load tokens/s cpu_s/step
for ((r = 1; r <= rounds; ++r)); do
  declare -A tok=()
  for side in A B; do
    bin=$a
    [[ $side == B ]] && bin=$b
    start=$(date -u +%H:%M:%S)
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    read -r t c < <(run_one "$bin")
    tok[$side]=$t
    printf '%-5s %-4s %-8s %-16s %12s %12s\n' "$r" "$side" "$start" "$load" "$t" "$c"
  done
  if [[ ${tok[A]} != - && ${tok[B]} != - ]]; then
    ratios+=("$(awk -v a="${tok[A]}" -v b="${tok[B]}" 'BEGIN { printf "%.3f", b / a }')")
  fi
  unset tok
done
echo "A = $a"
echo "B = $b"
echo "B / A tokens/s per round: ${ratios[*]:-none}"
if [[ ${#ratios[@]} -gt 0 ]]; then
  printf '%s\n' "${ratios[@]}" | sort -g |
    awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
                              printf "median B / A tokens/s: %.2fx over %d rounds\n", m, NR }'
fi
