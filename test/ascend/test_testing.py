"""``torch_npu.testing``: Ascend-style operator tests run here unchanged, and the helpers
they rely on behave as they must (a wrong npu result fails ``assertRtolEqual``).

The ``TestCase`` classes below are written the way Ascend's own operator tests are (cpu
result vs npu result of ``create_common_tensor`` inputs); the file runs under pytest and
as ``python test_testing.py`` through ``run_tests`` (checked by the last test, which is a
plain pytest function so that it is not part of the unittest run it starts).
"""
import os
import subprocess
import sys
import unittest

import numpy as np
import torch

import torch_npu
from torch_npu.testing.testcase import TestCase, run_tests
from torch_npu.testing.common_utils import (
    Baseline, SkipIfNotGteCANNVersion, SupportedDevices, check_operators_in_prof, create_common_tensor,
    create_dtype_tensor, freeze_rng_state, iter_indices, test_2args_broadcast,
)
from torch_npu.testing.common_distributed import TEST_SKIPS, TestSkip, skipIfUnsupportMultiNPU, with_comms
from torch_npu.testing.decorator import Dtypes, Formats, instantiate_tests


class TestAdd(TestCase):
    def cpu_op_exec(self, input1, input2):
        output = torch.add(input1, input2, alpha=1)
        return output.numpy()

    def npu_op_exec(self, input1, input2):
        output = torch.add(input1, input2, alpha=1)
        return output.to("cpu").numpy()

    def test_add_common_shape_format(self):
        shape_format = [
            [[np.float32, 0, (4, 3)], [np.float32, 0, (4, 3)]],
            [[np.float32, 2, (2, 3, 4)], [np.float32, 2, (2, 3, 4)]],
            [[np.int32, -1, (8,)], [np.int32, -1, (8,)]],
            [[np.float16, 29, (16, 16)], [np.float16, 29, (16, 16)]],
        ]
        for item in shape_format:
            cpu_input1, npu_input1 = create_common_tensor(item[0], 1, 100)
            cpu_input2, npu_input2 = create_common_tensor(item[1], 1, 100)
            self.assertEqual(npu_input1.device.type, "npu")
            cpu_output = self.cpu_op_exec(cpu_input1, cpu_input2)
            npu_output = self.npu_op_exec(npu_input1, npu_input2)
            self.assertRtolEqual(cpu_output, npu_output)


class TestMatmul(TestCase):
    def test_matmul_shape_format(self):
        for dtype in (np.float32, np.float16):
            cpu_a, npu_a = create_common_tensor([dtype, 2, (6, 5)], -1, 1)
            cpu_b, npu_b = create_common_tensor([dtype, 2, (5, 7)], -1, 1)
            cpu_out = torch.matmul(cpu_a, cpu_b)
            npu_out = torch.matmul(npu_a, npu_b)
            self.assertRtolEqual(cpu_out, npu_out.cpu())
            self.assertEqual(cpu_out, npu_out, prec=1e-3)


class TestSoftmax(TestCase):
    def test_softmax_backward(self):
        cpu_x, npu_x = create_common_tensor([np.float32, 0, (3, 4, 5)], -2, 2)
        cpu_x.requires_grad_(True)
        npu_x.requires_grad_(True)
        cpu_y = torch.softmax(cpu_x, dim=-1)
        npu_y = torch.softmax(npu_x, dim=-1)
        cpu_y.sum(dim=0).pow(2).sum().backward()
        npu_y.sum(dim=0).pow(2).sum().backward()
        self.assertRtolEqual(cpu_y.detach(), npu_y.detach())
        self.assertRtolEqual(cpu_x.grad, npu_x.grad)


@instantiate_tests
class TestDtypesFormats(TestCase):
    @Dtypes(torch.int32, torch.bool, torch.half, torch.float)
    @Formats(0, 2, 29)
    def test_assert_rtol_equal(self, device, dtype, npu_format):
        for size in [(), (0,), (6,), (6, 6)]:
            cpu_x, npu_x = create_dtype_tensor(size, dtype, npu_format, device=device)
            self.assertEqual(npu_x.device.type, "npu")
            self.assertEqual(torch_npu.get_npu_format(npu_x), npu_format)
            self.assertRtolEqual(cpu_x, npu_x)
            self.assertTensorsSlowEqual(cpu_x, npu_x, prec=1e-3)


def test_instantiate_tests_made_one_test_per_dtype_and_format():
    names = {n for n in vars(TestDtypesFormats) if n.startswith("test")}
    assert len(names) == 12 and "test_assert_rtol_equal" not in names
    assert "test_assert_rtol_equal_npu_float16_29" in names and "test_assert_rtol_equal_npu_bool_0" in names


from torch_npu.testing.common_methods_invocations import op_db  # noqa: E402
from torch_npu.testing.decorator import instantiate_ops_tests  # noqa: E402


@instantiate_ops_tests(op_db)
class TestOpDb(TestCase):
    def test_correctness(self, device, dtype, op):
        for sample in op.sample_inputs(device, dtype):
            cpu_sample = sample.transform(lambda t: t.cpu() if isinstance(t, torch.Tensor) else t)
            if op.name == "normal":
                # random: npu's generator is CUDA's Philox, whose draws differ from cpu's under
                # one seed (as CUDA's do); the same seed gives the same draws on npu again.
                torch.manual_seed(5)
                expected = op(sample.input, *sample.args, **sample.kwargs).cpu()
                torch.manual_seed(5)
            else:
                expected = op(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs)
            actual = op(sample.input, *sample.args, **sample.kwargs)
            self.assertEqual(actual[0].device.type if isinstance(actual, tuple) else actual.device.type, "npu")
            if isinstance(expected, tuple):
                for e, a in zip(expected, actual):
                    self.assertRtolEqual(e, a)
            else:
                self.assertRtolEqual(expected, actual)


def test_instantiate_ops_tests_made_one_test_per_op_dtype_and_format():
    names = sorted(n for n in vars(TestOpDb) if n.startswith("test"))
    assert names == ["test_correctness_median_float16_2", "test_correctness_median_float32_2",
                     "test_correctness_normal_number_mean_float32_2"]


class TestComparisonsFailWhereTheyMust(TestCase):
    def test_rtol_equal_rejects_a_wrong_npu_result(self):
        cpu_x, npu_x = create_common_tensor([np.float32, 2, (4, 3)], 1, 100)
        wrong = npu_x.clone()
        wrong[1, 2] += 0.5  # one element off
        with self.assertRaisesRegex(AssertionError, "result error"):
            self.assertRtolEqual(cpu_x, wrong)
        with self.assertRaisesRegex(AssertionError, "shape error"):
            self.assertRtolEqual(cpu_x, npu_x.reshape(3, 4))
        with self.assertRaisesRegex(AssertionError, "dtype error"):
            self.assertRtolEqual(cpu_x, npu_x.half())
        self.assertRtolEqual(cpu_x, npu_x.half(), auto_trans_dtype=True)  # compared as float16
        nan = torch.tensor([1.0, float("nan")])
        self.assertRtolEqual(nan, nan.npu())
        with self.assertRaisesRegex(AssertionError, "NaN"):
            self.assertRtolEqual(nan, torch.tensor([1.0, 2.0]).npu())
        with self.assertRaisesRegex(AssertionError, "booleans differ"):
            self.assertRtolEqual(torch.tensor([True, False]), torch.tensor([True, True]).npu())

    def test_rtol_equal_tolerances_follow_prec_and_prec16(self):
        x = torch.ones(100)
        self.assertRtolEqual(x, (x + 5e-5).npu())
        with self.assertRaises(AssertionError):
            self.assertRtolEqual(x, (x + 5e-4).npu())
        self.assertRtolEqual(x.half(), (x + 5e-4).half().npu())  # float16 uses prec16=1e-3
        self.assertRtolEqual(x, (x + 5e-4).npu(), prec=1e-3)
        bf16 = torch.randn(8).bfloat16()
        self.assertRtolEqual(bf16, bf16.npu())

    def test_assert_equal_uses_prec(self):
        x = torch.randn(5)
        self.assertEqual(x, x.npu() + 1e-6)
        with self.assertRaises(AssertionError):
            self.assertEqual(x, x.npu() + 1e-3)
        self.assertEqual(x, x.npu() + 1e-3, prec=1e-2)
        self.assertEqual([1.0, (2, x)], [1.0 + 1e-7, (2, x.npu())])
        with self.assertRaises(AssertionError):
            self.assertEqual(x, x.double(), exact_dtype=True)
        self.assertEqual(torch.full((3,), 2.0).npu(), 2)
        self.assertNotEqual(x, x.npu() + 1)
        with self.assertRaises(AssertionError):
            self.assertNotEqual(x, x.npu())
        self.assertAlmostEqual(1.0, 1.0 + 1e-8)
        with self.assertRaises(AssertionError):
            self.assertAlmostEqual(1.0, 1.01, places=3)
        big = torch.tensor([2**62 + 1])
        with self.assertRaises(AssertionError):
            self.assertEqual(big, torch.tensor([2**62]).npu())

    def test_warning_helpers_and_object_in(self):
        import warnings

        self.assertWarns(lambda: warnings.warn("w"))
        with self.assertRaises(AssertionError):
            self.assertWarns(lambda: None)
        self.assertNotWarn(lambda: None)
        with self.assertRaises(AssertionError):
            self.assertNotWarn(lambda: warnings.warn("w"))
        with self.maybeWarnsRegex(UserWarning, "deprecated"):
            pass
        with self.maybeWarnsRegex(UserWarning, "deprecated"):
            warnings.warn("this is deprecated")
        with self.assertRaises(AssertionError):
            with self.maybeWarnsRegex(UserWarning, "deprecated"):
                warnings.warn("something else")
        a = [1]
        self.assertObjectIn(a, [[1], a])
        with self.assertRaises(AssertionError):
            self.assertObjectIn([1], [a])

    def test_sparse_helpers_match_torch(self):
        x, indices, values = self.genSparseTensor((5, 4, 3), 2, 6, True)
        self.assertEqual(indices.shape, (2, 12))
        coalesced = self.safeCoalesce(x)
        self.assertTrue(coalesced.is_coalesced())
        self.assertEqual(self.safeToDense(x), x.to_dense())
        self.assertEqual(x, x.to_dense())


class TestRngBaselineAndProfilerHelpers(TestCase):
    def test_freeze_rng_state_restores_cpu_and_npu_generators(self):
        torch.npu.init()
        torch.manual_seed(7)
        with freeze_rng_state():
            torch.rand(3)
            torch.rand(3, device="npu")
        after_cpu, after_npu = torch.rand(3), torch.rand(3, device="npu")
        torch.manual_seed(7)
        self.assertEqual(after_cpu, torch.rand(3))
        self.assertEqual(after_npu, torch.rand(3, device="npu"))

    def test_baseline_round_trip(self):
        import tempfile

        path = os.path.join(tempfile.mkdtemp(), "b.json")
        b = Baseline(path)
        self.assertIsNone(b.get_baseline("op"))
        b.set_baseline("op", 1.5)
        b.save_baseline()
        self.assertEqual(Baseline(path).get_baseline("op"), 1.5)
        with self.assertRaises(TypeError):
            b.set_baseline("x", object())

    def test_check_operators_in_prof(self):
        x = torch.randn(4, 4, device="npu")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            torch.matmul(x, x).relu()
        self.assertTrue(check_operators_in_prof(["aten::matmul", "relu"], prof))
        self.assertFalse(check_operators_in_prof(["aten::conv2d"], prof))
        self.assertFalse(check_operators_in_prof(["aten::matmul"], prof, unexpected_operators=["relu"]))

    def test_iter_indices(self):
        self.assertEqual(list(iter_indices(torch.zeros(2, 3))), [(i, j) for i in range(2) for j in range(3)])
        self.assertEqual(list(iter_indices(torch.zeros(3))), [0, 1, 2])

    test_mul_broadcast = test_2args_broadcast(torch.mul)


class TestSkipConditions(TestCase):
    @SkipIfNotGteCANNVersion("8.1.RC1")
    def test_runs_on_a_recent_cann(self):
        self.assertTrue(torch_npu.npu.utils.get_cann_version() >= "8.1")

    def test_cann_version_gates(self):
        @SkipIfNotGteCANNVersion("99.0.RC1")
        def needs_future_cann():
            raise AssertionError("must not run")

        with self.assertRaises(unittest.SkipTest):
            needs_future_cann()
        with self.assertRaises(ValueError):
            SkipIfNotGteCANNVersion("eight")

    def test_supported_devices_follow_the_device_model(self):
        ran = []

        @SupportedDevices(["Ascend910B"])
        def only_910b():
            ran.append(True)

        name = torch.npu.get_device_name()
        if name.startswith("Ascend910B"):
            only_910b()
            self.assertEqual(ran, [True])
        else:
            with self.assertRaises(unittest.SkipTest):
                only_910b()

    def test_distributed_helpers(self):
        self.assertEqual(TEST_SKIPS["multi-npu"], TestSkip(75, "Need at least 2 NPU devices"))

        @skipIfUnsupportMultiNPU(torch.npu.device_count() + 1)
        def too_many():
            raise AssertionError("must not run")

        with self.assertRaises(unittest.SkipTest):
            too_many()

    @with_comms
    def test_with_comms_gives_a_process_group(self):
        import torch.distributed as dist

        self.assertTrue(dist.is_initialized())
        self.assertEqual(dist.get_backend(), "hccl")
        t = torch.ones(3, device="npu")
        dist.all_reduce(t)
        self.assertRtolEqual(torch.ones(3), t)


def test_npu_memory_leak_check_fails_a_leaking_test():
    kept = []

    class Leaky(TestCase):
        _do_npu_memory_leak_check = True

        def test_leaks(self):
            kept.append(torch.empty(1 << 20, dtype=torch.uint8, device="npu"))

        def test_frees(self):
            x = torch.empty(1 << 20, dtype=torch.uint8, device="npu")
            del x

    torch.npu.init()
    suite = unittest.TestSuite([Leaky("test_leaks"), Leaky("test_frees")])
    result = unittest.TestResult()
    suite.run(result)
    assert [t.id().rsplit(".", 1)[-1] for t, _ in result.failures] == ["test_leaks"]
    assert "leaked npu memory" in result.failures[0][1]
    kept.clear()


def test_supported_devices_on_each_card_model():
    code = (
        "import unittest, torch, torch_npu\n"
        "from torch_npu.testing.common_utils import SupportedDevices\n"
        "f = SupportedDevices(['Ascend910B'])(lambda: 'ran')\n"
        "try:\n    print(f())\nexcept unittest.SkipTest:\n    print('skipped')\n"
    )
    answers = {}
    for model in ("Ascend910B4", "Ascend310P3", ""):
        env = dict(os.environ, TORCH_NPU_DEVICE_MODEL=model, TORCH_NPU_MEMORY_CAPACITY_MB="1024")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        answers[model] = out.stdout.strip()
    assert answers == {"Ascend910B4": "ran", "Ascend310P3": "skipped", "": "skipped"}


def test_file_runs_through_run_tests_as_a_script():
    env = dict(os.environ, TORCH_NPU_MEMORY_CAPACITY_MB="1024")
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "-v"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "test_add_common_shape_format" in out.stderr and "test_assert_rtol_equal_npu_float16_29" in out.stderr
    assert "OK" in out.stderr.splitlines()[-1] or "OK (skipped" in out.stderr


if __name__ == "__main__":
    run_tests()
