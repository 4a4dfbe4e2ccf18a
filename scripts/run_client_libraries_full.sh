#!/usr/bin/env bash
# The full client-library set: the suite's test/clients (DeepSpeed, diffusers, peft,
# torchtitan) plus what CI leaves out: torchtitan with FSDP on 2 ranks, and DeepSpeed's own
# cpu accelerator (DS_ACCELERATOR=cpu) on 2 ranks compared bit for bit with the npu runs.
# The cpu accelerator JIT-compiles its deepspeed_shm_comm extension (about two minutes of
# CPU); each run builds it in a directory of its own, so that a compile killed by a timeout
# never leaves the lock file that makes the next run wait forever.
# TORCH_NPU_CLIENT_CENSUS=1 adds, to each worker's report, the torch_npu functions called.
set -euo pipefail
cd "$(dirname "$0")/.."
export TORCH_NPU_CLIENTS_FULL=1
exec .venv/bin/python -m pytest -q test/clients "$@"
