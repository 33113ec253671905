#!/usr/bin/env bash
# The speed table of the three 130m-shaped models (Mamba-2, Mamba-3 SISO,
# Mamba-3 MIMO R=4) in F32, BF16 and int8 at batch 1 and 8: each model is
# initialised (random weights: speed does not depend on them) into a temporary
# directory and `ssm bench --json` runs on it; the results are printed as one
# markdown table, each figure with the bound `ssm bench` measured in the same
# run (streaming read for decode, OpenBLAS SGEMM for prefill). Each decode
# row's read is measured just before and just after the row (both printed;
# the bound takes the higher), so a row and its bound see the same machine.
#
#   scripts/bench-table.sh [ssm bench flags; default -b 1,8 -p 512 -n 64 -r 2]
#
# SSM (default build/ssm) names the binary. Run it on an otherwise idle
# machine: prefill's SGEMM bound is measured once, at the start of a model's run.
set -euo pipefail
cd "$(dirname "$0")/.."
ssm=${SSM:-build/ssm}
[ -x "$ssm" ] || { echo "bench-table.sh: $ssm is not built (scripts/build.sh)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "bench-table.sh: needs python3" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(-b 1,8 -p 512 -n 64 -r 2)
models=(mamba2_130m mamba3_siso_130m mamba3_mimo4_130m)
for m in "${models[@]}"; do
  "$ssm" init --config "bench/configs/$m.json" --out "$tmp/$m" >/dev/null
  echo "bench-table.sh: $m ..." >&2
  "$ssm" bench "$tmp/$m" --dtype f32,bf16,int8 "${flags[@]}" --json >"$tmp/$m.json"
done

python3 - "$tmp" "${models[@]}" <<'EOF'
import json, sys

tmp, models = sys.argv[1], sys.argv[2:]
print("| model | dtype | batch | test | tokens/s | bound | of bound | of read+state "
      "| read before / after (GB/s) | peak RSS |")
print("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
bounds = []
for m in models:
    with open(f"{tmp}/{m}.json") as f:
        r = json.load(f)
    for b in r["bounds"]:
        bounds.append(f"{m}, {b['threads']} threads: streaming read {b['read_gbs']:.1f} GB/s at the start, "
                      f"OpenBLAS SGEMM {b['sgemm_gflops']:.1f} GFLOP/s on "
                      f"{' x '.join(str(d) for d in b['sgemm_shape'])}")
    for row in r["results"]:
        print(f"| {m} | {row['dtype']} | {row['batch']} | {row['test']} "
              f"| {row['tokens_per_s']:.1f} ± {row['deviation']:.1f} "
              f"| {row['bound_tokens_per_s']:.1f} ({row['bound']}) "
              f"| {100 * row['fraction_of_bound']:.0f}% "
              + (f"| {100 * row['fraction_of_bound_with_state']:.0f}% "
                 if row.get('bound_with_state_tokens_per_s', 0) > 0 else "| - ")
              + (f"| {row['read_gbs_before']:.1f} / {row['read_gbs_after']:.1f} "
                 if row.get('read_gbs_before', 0) > 0 else "| - ")
              + f"| {row['peak_rss_bytes'] / 2**20:.0f} MiB |")
print()
print("Bounds measured in each model's run (" + r["simd"] + "):")
for b in bounds:
    print(f"- {b}")
print()
print("pp: prefill, bound = projection FLOPs per token at the SGEMM rate; "
      "tg: decode, bound = weight bytes per step at the streaming read rate (the higher of the "
      "reads just before and just after the row), times the batch; "
      "read+state: decode against the same rate over the weight bytes plus the recurrent state's "
      "bytes (read once per step and sequence).")
EOF
