#!/usr/bin/env python3
"""Summarises kernel_trace.c's log by step: the kernels between two launches
of a marker kernel (a decode step's first, e.g. the embedding's) make a step;
the last STEPS steps are averaged.

    steps.py TRACE MARKER [STEPS]

For each kernel of a step, in launch order: its time on the GPU (end - start)
and how far it moved the step's end ("adds": its end minus the later of its
start and the latest end before it, 0 when it ended under an earlier
kernel's cover), summed by name; "(idle)" is time no kernel ran. The adds
of a step sum to its span, so they say where the step's time goes
when kernels overlap (programmatic dependent launch)."""
import re
import subprocess
import sys
from collections import defaultdict

if len(sys.argv) < 3:
    sys.exit(__doc__)
path, marker = sys.argv[1], sys.argv[2]
keep = int(sys.argv[3]) if len(sys.argv) > 3 else 20

rows = []
for line in open(path):
    parts = line.split(" ", 5)
    if len(parts) == 6:
        rows.append((int(parts[0]), int(parts[1]), int(parts[3]), int(parts[4]), parts[5].strip()))
rows.sort()
if not rows:
    sys.exit("no kernels in " + path)
names = sorted({r[4] for r in rows})
plain = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
def shorten(name):
    """ssm::cuda::(anonymous namespace)::k<T>(args) -> k<T>"""
    name = name.replace("(anonymous namespace)::", "")
    if name.startswith("void "):
        name = name[5:]
    depth = 0
    for i, ch in enumerate(name):  # cut at the parameters' '(' (outside <...>)
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0:
            name = name[:i]
            break
    head, sep, rest = name.partition("<")
    return (head.split("::")[-1] + sep + rest)[:90]


short = {m: shorten(d or m) for m, d in zip(names, plain)}

marks = [i for i, r in enumerate(rows) if re.search(marker, short[r[4]])]
if len(marks) < 2:
    sys.exit(f"fewer than two launches of a kernel matching {marker!r}")
steps = [(marks[i], marks[i + 1]) for i in range(len(marks) - 1)][-keep:]
time, adds, count = defaultdict(float), defaultdict(float), defaultdict(int)
spans, periods = [], []
for a, b in steps:
    latest = rows[a][0]
    for start, end, grid, block, name in rows[a:b]:
        key = f"{short[name]} [{grid}x{block}]"
        time[key] += (end - start) / 1e3
        adds[key] += max(0, end - max(latest, start)) / 1e3
        if start > latest:  # no kernel ran: launch latency, host, copies
            adds["(idle)"] += (start - latest) / 1e3
        latest = max(latest, end)
        count[key] += 1
    spans.append((latest - rows[a][0]) / 1e3)
    periods.append((rows[b][0] - rows[a][0]) / 1e3)
n = len(steps)
print(f"{n} steps: span {sum(spans) / n:.1f} us (kernels' first start to last end), "
      f"period {sum(periods) / n:.1f} us (start to next start)")
print(f"{'adds us':>9} {'time us':>9} {'launches':>8}  kernel [grid x block], per step")
for key in sorted(adds, key=lambda k: -adds[k]):
    print(f"{adds[key] / n:9.1f} {time[key] / n:9.1f} {count[key] / n:8.1f}  {key}")
