#!/usr/bin/env python3
"""Sums an `ncu --csv --page raw --metrics gpu__time_duration.sum` log by
kernel name and prints the kernels by total time, largest first."""
import csv
import sys
from collections import defaultdict

total, count = defaultdict(float), defaultdict(int)
lines = [l for l in open(sys.argv[1], errors="replace") if l.startswith('"')]
rows = list(csv.reader(lines))
if not rows:
    sys.exit("no ncu rows in " + sys.argv[1])
head = rows[0]
name_col, time_col = head.index("Kernel Name"), head.index("gpu__time_duration.sum")
for r in rows[1:]:
    try:
        t = float(r[time_col].replace(",", ""))
    except (ValueError, IndexError):
        continue  # the units row
    name = r[name_col].split("(")[0][:90]
    total[name] += t
    count[name] += 1
unit = rows[1][time_col] if len(rows) > 1 else ""
grand = sum(total.values())
print(f"{len(rows) - 1} launches, {grand / 1e6:.2f} ms in kernels (unit of the log: {unit or 'ns'})")
for name, t in sorted(total.items(), key=lambda kv: -kv[1])[:int(sys.argv[2]) if len(sys.argv) > 2 else 25]:
    print(f"{t / 1e6:9.3f} ms {100 * t / grand:5.1f}% {count[name]:6d}x  {name}")
