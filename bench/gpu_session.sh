#!/usr/bin/env bash
# One GPU session's checks and benchmarks in one command (a lent GPU is held for minutes, so
# the work is batched): the GPU tests, then the kernel-time, launch-overhead and reverse-mode
# overhead tables.
#   bash bench/gpu_session.sh OUTDIR [tests|bench|launch|grad|evolve|cfd|enzyme|all]   (launch,
#   grad, evolve, cfd, enzyme: that table only; several modes joined by commas, e.g.
#   tests,grad; evolve, cfd and enzyme are not part of all: EVOLVE_ARGS, CFD_ARGS and
#   ENZYME_ARGS pass their options)
set -uo pipefail
out=${1:?output directory}
what=,${2:-all},
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >/dev/null 2>&1 ||
    python3 -m pip install -q --no-deps -e .
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
status=0
if [[ $what == *,tests,* || $what == *,all,* ]]; then
    start=$SECONDS
    python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider -x 2>&1 | tee "$out/pytest-gpu.log" |
        tail -4
    status=${PIPESTATUS[0]}
    echo "gpu tests: $((SECONDS - start)) s"
fi
if [[ $what == *,bench,* || $what == *,all,* ]]; then
    start=$SECONDS
    python3 bench/gpu_kernels.py --output "$out/gpu-kernels.md" 2>&1 | tail -30
    echo "kernel table: $((SECONDS - start)) s"
fi
if [[ $what =~ ,(bench|launch|all), ]]; then
    start=$SECONDS
    python3 bench/launch_overhead.py --output "$out/launch-overhead.md" 2>&1 | tail -25
    echo "launch table: $((SECONDS - start)) s"
fi
if [[ $what =~ ,(grad|all), ]]; then
    start=$SECONDS
    python3 bench/grad_overhead.py --output "$out/grad-overhead.md" 2>&1 | tail -20
    echo "grad table: $((SECONDS - start)) s"
fi
if [[ $what == *,cfd,* ]]; then
    # CFD_ARGS: options of bench.cfd.run (--variants ..., --no-peers)
    start=$SECONDS
    python3 -m bench.cfd.run ${CFD_ARGS:-} --output "$out/cfd.md" 2>&1 | grep -v "^|" | tail -30
    echo "cfd table: $((SECONDS - start)) s"
fi
if [[ $what == *,enzyme,* ]]; then
    # ENZYME_ARGS: options of bench.enzyme.run (--apps xsbench,rsbench --scale quick|paper)
    start=$SECONDS
    python3 -m bench.enzyme.run ${ENZYME_ARGS:-} --device cuda --output "$out/enzyme.md" 2>&1 |
        grep -v "^|" | tail -40
    echo "enzyme table: $((SECONDS - start)) s"
fi
if [[ $what == *,evolve,* ]]; then
    # EVOLVE_ARGS: options of bench.evolve.run (workloads, budget, pairs...)
    start=$SECONDS
    python3 -m bench.evolve.run ${EVOLVE_ARGS:-} --output "$out/evolve.md" 2>&1 | tail -40
    echo "evolve table: $((SECONDS - start)) s"
fi
exit $status
