#!/usr/bin/env python3
"""Sums an `ncu --csv --page raw --metrics gpu__time_duration.sum` log by
kernel name and prints the kernels by total time, largest first.

    ncu-kernel-times.py LOG [TOP] [--last-step KERNEL]

--last-step KERNEL keeps only the launches of the last training step: those
after the last-but-one run of consecutive KERNEL launches (e.g. adamw, the
optimiser's, one launch per parameter at each step's end) up to the end of
the last run. Without it, every launch of the log counts."""
import csv
import sys
from collections import defaultdict

args = sys.argv[1:]
step_kernel = None
if "--last-step" in args:
    i = args.index("--last-step")
    if i + 1 >= len(args):
        sys.exit("--last-step needs a kernel name")
    step_kernel = args[i + 1]
    del args[i:i + 2]
if not args:
    sys.exit(__doc__)
top = int(args[1]) if len(args) > 1 else 25

lines = [l for l in open(args[0], errors="replace") if l.startswith('"')]
rows = list(csv.reader(lines))
if not rows:
    sys.exit("no ncu rows in " + args[0])
head = rows[0]
name_col, time_col = head.index("Kernel Name"), head.index("gpu__time_duration.sum")
launches = []  # (name, time), in launch order
for r in rows[1:]:
    try:
        t = float(r[time_col].replace(",", ""))
    except (ValueError, IndexError):
        continue  # the units row
    launches.append((r[name_col].split("(")[0][:90], t))

if step_kernel:
    runs = []  # [first, last] launch index of each run of step_kernel
    for i, (name, _) in enumerate(launches):
        if step_kernel in name:
            if runs and runs[-1][1] == i - 1:
                runs[-1][1] = i
            else:
                runs.append([i, i])
    if len(runs) < 2:
        sys.exit(f"--last-step {step_kernel}: {len(runs)} runs of it in the log, need two")
    launches = launches[runs[-2][1] + 1:runs[-1][1] + 1]
    print(f"the last step: launches after the last-but-one run of '{step_kernel}'")

total, count = defaultdict(float), defaultdict(int)
for name, t in launches:
    total[name] += t
    count[name] += 1
unit = rows[1][time_col] if len(rows) > 1 else ""
grand = sum(total.values())
print(f"{len(launches)} launches, {grand / 1e6:.2f} ms in kernels (unit of the log: {unit or 'ns'})")
for name, t in sorted(total.items(), key=lambda kv: -kv[1])[:top]:
    print(f"{t / 1e6:9.3f} ms {100 * t / grand:5.1f}% {count[name]:6d}x  {name}")
