#!/usr/bin/env bash
# Time, traffic, occupancy and stall reasons of the probe's kernels (one launch each) under ncu.
#   bash bench/ncu_probe.sh [KERNEL-REGEX] [PROBE-FILTER]     (default: lbm LBM)
export PYTHONPATH=$PWD
m=gpu__time_duration.sum,dram__bytes.sum,smsp__inst_executed.sum,launch__registers_per_thread
m=$m,sm__warps_active.avg.pct_of_peak_sustained_active
for r in long_scoreboard lg_throttle drain membar wait math_pipe_throttle short_scoreboard branch_resolving no_instruction barrier mio_throttle tex_throttle not_selected selected dispatch_stall; do
    m=$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
done
ncu -k "regex:${1:-lbm}" --metrics $m --csv python3 bench/grad_probe.py --only "${2:-LBM}" 2>/dev/null |
    grep -v "^==PROF==" | python3 -c '
import csv, sys
rows = [r for r in csv.reader(sys.stdin) if len(r) > 10]
head, rows = rows[0], rows[1:]
k = {n: i for i, n in enumerate(head)}
for r in rows:
    name = r[k["Metric Name"]].replace("smsp__average_warps_issue_stalled_", "stall ")
    name = name.replace("_per_issue_active.ratio", "")
    print(r[k["ID"]], r[k["Grid Size"]], f"{name:55s}", r[k["Metric Value"]])
'
