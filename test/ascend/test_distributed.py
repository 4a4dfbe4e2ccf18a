"""Ascend's extra distributed names: the uneven collectives on 2 ranks over hccl (loopback,
hard timeout), reinit_process_group, fsdp.fully_shard, is_(hccl_)available, run.parse_args
and the npu RPC backend options."""
from __future__ import annotations

import os
import sys

import pytest
import torch

import torch_npu  # noqa: F401
import torch_npu.distributed as npu_dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "distributed"))
from launcher import torchrun  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WORLD = 2
SPLITS = [r + 2 for r in range(WORLD)]


def rows_of(r):
    g = torch.Generator().manual_seed(100 + r)
    return torch.randint(-50, 50, (sum(SPLITS), 3), generator=g).float()


@pytest.fixture(scope="module")
def launch():
    result = torchrun(os.path.join(HERE, "workers", "ascend_distributed_names.py"), nproc=WORLD, timeout=240)
    assert result.returncode == 0, result.explain()
    return result


def test_reduce_scatter_tensor_uneven_equals_the_cpu_sum_of_each_ranks_rows(launch):
    total = sum(rows_of(r) for r in range(WORLD))
    starts = [sum(SPLITS[:r]) for r in range(WORLD)]
    for r in range(WORLD):
        expected = total[starts[r]:starts[r] + SPLITS[r]].tolist()
        assert launch.result(r, "reduce_scatter_sync") == expected
        assert launch.result(r, "reduce_scatter_async") == expected


def test_all_gather_into_tensor_uneven_concatenates_every_ranks_rows(launch):
    expected = torch.cat([torch.arange(SPLITS[r] * 3, dtype=torch.float32).reshape(SPLITS[r], 3) + 100 * r
                          for r in range(WORLD)]).tolist()
    for r in range(WORLD):
        assert launch.result(r, "all_gather_sync") == expected
        assert launch.result(r, "all_gather_async") == expected


def test_bad_split_reinit_fsdp_and_availability(launch):
    for r in range(WORLD):
        res = launch.result(r)
        assert "add up to" in res["bad_split"]
        assert res["all_reduce_after_reinit"] == [float(sum(range(1, WORLD + 1)))] * 2
        assert res["is_hccl_available"] is True and res["is_available"] is True
        assert res["fsdp_max_diff"] < 1e-6 and res["fsdp_class"].startswith("FSDP")


def test_sync_batch_norm_over_two_ranks_equals_batch_norm_of_the_whole_batch(launch):
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(7)
    full_x = torch.randn(2 * WORLD, 3, 4, generator=g)
    full_grad = torch.randn(2 * WORLD, 3, 4, generator=g)
    weight, bias = torch.randn(3, generator=g), torch.randn(3, generator=g)
    x, w, b = (t.double().requires_grad_() for t in (full_x, weight, bias))
    running_mean, running_var = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    y = F.batch_norm(x, running_mean, running_var, w, b, True, 0.1, 1e-5)
    y.backward(full_grad.double())
    w_grad_sum = torch.zeros(3, dtype=torch.float64)
    b_grad_sum = torch.zeros(3, dtype=torch.float64)
    for r in range(WORLD):
        res = launch.result(r)
        rows = slice(2 * r, 2 * r + 2)
        torch.testing.assert_close(torch.tensor(res["sbn_out"], dtype=torch.float64), y.detach()[rows],
                                   rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(torch.tensor(res["sbn_x_grad"], dtype=torch.float64), x.grad[rows],
                                   rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(torch.tensor(res["sbn_running_mean"], dtype=torch.float64), running_mean)
        torch.testing.assert_close(torch.tensor(res["sbn_running_var"], dtype=torch.float64), running_var)
        w_grad_sum += torch.tensor(res["sbn_w_grad"], dtype=torch.float64)
        b_grad_sum += torch.tensor(res["sbn_b_grad"], dtype=torch.float64)
    # The weight and bias grads are each rank's share; DDP's averaging makes them whole.
    torch.testing.assert_close(w_grad_sum, w.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(b_grad_sum, b.grad, rtol=1e-4, atol=1e-5)


def test_reinit_without_a_group_is_a_clear_error():
    with pytest.raises(RuntimeError, match="init_process_group"):
        npu_dist.reinit_process_group()


def test_run_parse_args_is_torchruns_parser():
    args = npu_dist.run.parse_args(["--nproc-per-node=2", "--master-port=1234", "train.py", "--lr", "0.1"])
    assert args.nproc_per_node == "2" and args.master_port == 1234
    assert args.training_script == "train.py" and args.training_script_args == ["--lr", "0.1"]


def test_npu_rpc_backend_options_map_ints_to_npu_devices():
    from torch_npu.distributed.rpc.options import NPUTensorPipeRpcBackendOptions

    opts = NPUTensorPipeRpcBackendOptions(num_worker_threads=4, device_maps={"worker1": {0: 1}}, devices=[0, "npu:1"])
    assert opts.num_worker_threads == 4
    assert opts.device_maps == {"worker1": {torch.device("npu", 0): torch.device("npu", 1)}}
    assert opts.devices == [torch.device("npu", 0), torch.device("npu", 1)]
    opts.set_device_map("worker2", {"npu:1": 0})
    assert opts.device_maps["worker2"] == {torch.device("npu", 1): torch.device("npu", 0)}
    opts.set_devices([1])
    assert opts.devices == [torch.device("npu", 1)]
    with pytest.raises(ValueError, match="not an npu device"):
        opts.set_device_map("worker3", {"cuda:0": 0})


def test_pipelining_pipeline_splits_like_torch_and_rejects_ascend_only_modes():
    from torch.distributed.pipelining import SplitPoint

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    x = torch.randn(2, 4)
    pipe = npu_dist.pipelining.pipeline(model, (x,), split_spec={"1": SplitPoint.BEGINNING})
    assert pipe.num_stages == 2
    torch.testing.assert_close(pipe(x)[0], model(x))
    with pytest.raises(RuntimeError, match="mode and atomic_units"):
        npu_dist.pipelining.pipeline(model, (x,), mode="graph")
