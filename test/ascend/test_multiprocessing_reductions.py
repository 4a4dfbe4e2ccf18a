"""``torch_npu.multiprocessing.reductions``: the rebuild functions Ascend names. npu tensors
pickled for another process (``ForkingPickler``, what ``torch.multiprocessing`` queues use)
travel as ``rebuild_npu_tensor`` and Ascend's fifteen arguments and come back over the same
memory; ``interprocess=True`` events travel as ``rebuild_npu_event(device, handle)``.
The cross-process case runs in a fresh interpreter with a hard timeout.
"""
import json
import os
import pickle
import subprocess
import sys
from multiprocessing.reduction import ForkingPickler

import torch

import torch_npu
from torch_npu.multiprocessing.reductions import rebuild_npu_event, rebuild_npu_tensor
from torch_npu.testing.testcase import TestCase, run_tests

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))


class TestReductions(TestCase):
    def test_an_npu_tensor_travels_as_rebuild_npu_tensor_with_ascends_arguments(self):
        base = torch.arange(24.).reshape(4, 6)
        x = base.npu()[1:, 2:]
        rebuild, args = ForkingPickler._extra_reducers[torch.Tensor](x)  # the reducer import torch_npu registered
        self.assertIs(rebuild, rebuild_npu_tensor)
        (tensor_cls, size, stride, offset, storage_cls, dtype, device, handle, nbytes, storage_offset_bytes,
         requires_grad, counter, counter_offset, event_handle, event_sync_required) = args
        self.assertEqual((tensor_cls, size, stride, offset), (torch.Tensor, (3, 4), (6, 1), 8))
        self.assertEqual((storage_cls, dtype, device, nbytes), (torch.UntypedStorage, torch.float32, 0, 24 * 4))
        self.assertFalse(requires_grad)
        self.assertIsNotNone(handle)
        self.assertIsNotNone(counter)
        self.assertIsInstance(storage_offset_bytes, int)
        self.assertIsInstance(counter_offset, int)
        # work on the simulated device is finished when queued: no event to wait for
        self.assertEqual((event_handle, event_sync_required), (None, False))

    def test_the_rebuilt_tensor_shares_the_memory(self):
        base = torch.arange(24.).reshape(4, 6)
        x = base.npu()[1:, 2:]
        y = pickle.loads(ForkingPickler.dumps(x))
        self.assertEqual((y.device.type, tuple(y.shape), y.stride(), y.storage_offset()), ("npu", (3, 4), (6, 1), 8))
        self.assertEqual(y.cpu(), base[1:, 2:], prec=0)
        y.mul_(2)
        self.assertEqual(x.cpu(), base[1:, 2:] * 2, prec=0)

    def test_parameters_empty_tensors_and_refusals(self):
        p = torch.nn.Parameter(torch.ones(3).npu())
        q = pickle.loads(ForkingPickler.dumps(p))
        self.assertIs(type(q), torch.nn.Parameter)
        self.assertTrue(q.requires_grad)
        empty = pickle.loads(ForkingPickler.dumps(torch.empty(0, 3).npu()))
        self.assertEqual((empty.device.type, tuple(empty.shape)), ("npu", (0, 3)))
        with self.assertRaisesRegex(RuntimeError, "non-leaf tensor which requires_grad"):
            ForkingPickler.dumps(torch.ones(2).npu().requires_grad_() * 2)

    def test_an_interprocess_event_travels_as_rebuild_npu_event(self):
        event = torch.npu.Event(interprocess=True)
        event.record()
        rebuilt = pickle.loads(ForkingPickler.dumps(event))
        self.assertIsInstance(rebuilt, torch.npu.Event)
        self.assertTrue(rebuilt.query())
        rebuilt.synchronize()
        opened = rebuild_npu_event(0, event.ipc_handle())
        self.assertEqual(str(opened.device), "npu:0")
        self.assertTrue(opened.query())

    def test_event_handle_errors(self):
        with self.assertRaisesRegex(RuntimeError, "interprocess=True"):
            torch.npu.Event().ipc_handle()
        with self.assertRaisesRegex(ValueError, "handle must be"):
            rebuild_npu_event(0, b"not a handle")
        with self.assertRaisesRegex(ValueError, "not an npu event handle"):
            rebuild_npu_event(0, b"X" * len(torch.npu.Event(interprocess=True).ipc_handle()))


_SPAWN = """
import json, torch, torch_npu
import torch.multiprocessing as mp
from reductions_worker import receive_tensor_and_event

base = torch.arange(8, dtype=torch.float32).reshape(2, 4)
x = base.to("npu")[:, 1:]
event = torch.npu.Event(interprocess=True)
event.record()
ctx = mp.get_context("spawn")
inbox, outbox = ctx.Queue(), ctx.Queue()
child = ctx.Process(target=receive_tensor_and_event, args=(inbox, outbox))
child.start()
inbox.put((x, event))
received = outbox.get(timeout=120)
done = outbox.get(timeout=60)
child.join(60)
print("REPORT" + json.dumps({"exitcode": child.exitcode, "received": received, "done": done,
                             "parent_sees_write": torch.equal(x.cpu(), base[:, 1:] * 10)}))
"""


def test_a_spawned_child_receives_the_tensor_and_the_event():
    env = dict(os.environ, TORCH_NPU_MEMORY_CAPACITY_MB="256")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(HERE, "workers"), REPO_ROOT,
                                                     os.environ.get("PYTHONPATH", "")) if p)
    result = subprocess.run([sys.executable, "-c", _SPAWN], env=env, capture_output=True, text=True, timeout=240,
                            cwd=REPO_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(next(l for l in result.stdout.splitlines() if l.startswith("REPORT"))[len("REPORT"):])
    assert report == {"exitcode": 0, "received": ["Event", True, "npu:0", [[1.0, 2.0, 3.0], [5.0, 6.0, 7.0]]],
                      "done": "written", "parent_sees_write": True}


if __name__ == "__main__":
    run_tests()
