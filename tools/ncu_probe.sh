#!/usr/bin/env bash
# Time, traffic, occupancy and stall reasons of a probe's kernels (one launch each) under ncu.
#   bash tools/ncu_probe.sh [KERNEL-REGEX] [PROBE-FILTER]     reverse mode (default: lbm LBM)
#   bash tools/ncu_probe.sh cfd VARIANT...                    bench/cfd's flux-Jacobian kernels
export PYTHONPATH=$PWD
m=gpu__time_duration.sum,dram__bytes.sum,smsp__inst_executed.sum,launch__registers_per_thread
m=$m,sm__warps_active.avg.pct_of_peak_sustained_active,lts__t_sectors_op_red.sum
m=$m,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed
m=$m,sm__throughput.avg.pct_of_peak_sustained_elapsed
m=$m,smsp__sass_thread_inst_executed_op_dfma_pred_on.sum,smsp__sass_thread_inst_executed_op_dmul_pred_on.sum
m=$m,smsp__sass_thread_inst_executed_op_dadd_pred_on.sum
m=$m,l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum
m=$m,l1tex__t_sector_hit_rate.pct,l1tex__data_pipe_lsu_wavefronts.sum,smsp__inst_executed_op_shfl.sum,smsp__inst_executed_op_shared_atom.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed_op_global_ld.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum
for r in long_scoreboard lg_throttle drain membar wait math_pipe_throttle short_scoreboard branch_resolving no_instruction barrier mio_throttle tex_throttle not_selected selected dispatch_stall; do
    m=$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
done
if [[ ${1:-} == cfd ]]; then
    shift
    cmd=(${CFD_PROBE:-python3 -m bench.cfd.probe} "$@")    # CFD_PROBE: e.g. tools/cfd_extra.py probe
    regex="hand|dn"
else
    cmd=(python3 tools/grad_probe.py --only "${2:-LBM}")
    regex=${1:-lbm}
fi
ncu -k "regex:$regex" --metrics $m --csv "${cmd[@]}" 2>/tmp/ncu_probe.err |
    grep -v "^==PROF==" | python3 -c '
import csv, sys
rows = [r for r in csv.reader(sys.stdin) if len(r) > 10]
head, rows = rows[0], rows[1:]
k = {n: i for i, n in enumerate(head)}
for r in rows:
    name = r[k["Metric Name"]].replace("smsp__average_warps_issue_stalled_", "stall ")
    name = name.replace("_per_issue_active.ratio", "")
    print(r[k["ID"]], r[k["Kernel Name"]][:16], f"{name:55s}", r[k["Metric Value"]])
'
grep -i -m5 error /tmp/ncu_probe.err
