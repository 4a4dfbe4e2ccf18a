#!/usr/bin/env bash
# The full distributed set: every test of test/distributed, with the world-size-generic ones
# (collectives, DDP) on 2, 3 and 4 ranks instead of the suite's 2, then the two hccl
# benchmarks (all_reduce bus bandwidth and DDP step time, npu/hccl against cpu/gloo).
# Run on a quiet machine: the benchmarks print the load average they ran under.
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_NPU_DIST_FULL=1 .venv/bin/python -m pytest -q test/distributed "$@"
.venv/bin/python bench/bench_allreduce.py
.venv/bin/python bench/bench_ddp.py
