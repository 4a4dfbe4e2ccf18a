"""torch_npu.distributed.rpc: RPC backend options that accept npu device maps."""
