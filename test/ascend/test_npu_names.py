"""The ``torch_npu.npu`` names of the Ascend listing that were missing: ``torch.npu._lazy_call``
(what DeepSpeed's activation checkpointing calls), the module paths Ascend code imports
from (``torch_npu.npu.utils``, ``npu_config``, ``autocast_utils``, ``amp.grad_scaler``, ...),
and the stream, event, graph, marker and scaler additions; each against cpu or the
behaviour the Ascend reference gives it.
"""
import os
import subprocess
import sys

import numpy as np
import torch

import torch_npu
from torch_npu.testing.testcase import TestCase, run_tests
from torch_npu.testing.common_utils import create_common_tensor


def _run_fresh(code, **env):
    environment = dict(os.environ, TORCH_NPU_MEMORY_CAPACITY_MB="1024", **env)
    out = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=120)
    return out


class TestLazyCall(TestCase):
    def test_queued_until_the_device_initialises_then_run_once(self):
        code = (
            "import torch, torch_npu\n"
            "calls = []\n"
            "torch.npu._lazy_call(lambda: calls.append('a'))\n"
            "torch.npu._lazy_call(lambda: calls.append('seed1'), seed=True)\n"
            "torch.npu._lazy_call(lambda: calls.append('seed2'), seed=True)\n"
            "assert not torch.npu.is_initialized() and calls == [], calls\n"
            "x = torch.ones(2, device='npu')\n"
            "assert calls == ['seed2', 'a'], calls\n"
            "torch.npu._lazy_call(lambda: calls.append('now'))\n"
            "assert calls == ['seed2', 'a', 'now'], calls\n"
            "torch.ones(2, device='npu')\n"
            "assert calls == ['seed2', 'a', 'now'], calls\n"
            "print('ok')\n"
        )
        out = _run_fresh(code)
        self.assertEqual(out.returncode, 0, message=out.stderr)
        self.assertEqual(out.stdout.strip(), "ok")

    def test_deepspeed_style_rng_restore_through_lazy_call(self):
        # DeepSpeed's checkpointing restores the device RNG state with
        # _lazy_call(lambda: default_generator.set_state(state)).
        torch.npu.init()
        torch.npu.manual_seed(3)
        state = torch.npu.get_rng_state()
        first = torch.rand(4, device="npu")

        def restore():
            torch.npu.default_generators[torch.npu.current_device()].set_state(state)

        torch.npu._lazy_call(restore)
        self.assertRtolEqual(first, torch.rand(4, device="npu"))

    def test_a_failing_queued_call_names_where_it_was_queued(self):
        code = (
            "import torch, torch_npu\n"
            "def broken():\n    raise ValueError('boom')\n"
            "torch.npu._lazy_call(broken)\n"
            "try:\n    torch.npu.init()\nexcept torch_npu.npu.lazy_calls.DeferredNpuCallError as e:\n"
            "    assert 'boom' in str(e) and 'originally invoked at' in str(e), str(e)\n    print('raised')\n"
        )
        out = _run_fresh(code)
        self.assertEqual(out.returncode, 0, message=out.stderr)
        self.assertEqual(out.stdout.strip(), "raised")
        with self.assertRaises(TypeError):
            torch.npu._lazy_call(lambda: None, when="later")


class TestCannVersion(TestCase):
    def test_versions_of_each_component(self):
        from torch_npu.npu.utils import _is_gte_cann_version, get_cann_version

        for module in ("CANN", "RUNTIME", "COMPILER", "HCCL", "TOOLKIT", "OPP", "OPP_KERNEL", "DRIVER"):
            self.assertRegex(get_cann_version(module), r"^\d+\.\d+\.(RC)?\d+$")
        self.assertEqual(get_cann_version("CAN"), "")
        installed = get_cann_version()
        major = int(installed.split(".")[0])
        self.assertTrue(_is_gte_cann_version("8.1.RC1"))  # what Ascend tests gate on most
        self.assertTrue(_is_gte_cann_version(installed))
        self.assertFalse(_is_gte_cann_version(f"{major + 1}.0.RC1"))
        self.assertFalse(_is_gte_cann_version("8.1.RC1", module="CAN"))
        # Within a minor line: test builds, then release candidates, then releases.
        from torch_npu.npu.cann_version import _parse

        order = ["8.2.T5", "8.2.RC1.alpha002", "8.2.RC1", "8.2.RC2", "8.2.0", "8.2.1", "8.3.RC1"]
        self.assertEqual(sorted(order, key=_parse), order)
        self.assertEqual(torch_npu.npu.aclnn.backends.version(), get_cann_version("OPP"))

    def test_environment_override_and_its_validation(self):
        code = ("import torch_npu.npu.cann_version as c\n"
                "print(c.get_cann_version(), c._is_gte_cann_version('8.1.RC1'))\n")
        out = _run_fresh(code, TORCH_NPU_CANN_VERSION="8.0.RC2")
        self.assertEqual(out.stdout.split(), ["8.0.RC2", "False"], message=out.stderr)
        out = _run_fresh(code, TORCH_NPU_CANN_VERSION="eight")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("invalid CANN version 'eight'", out.stderr)


class TestModulePaths(TestCase):
    def test_utils_npu_config_and_autocast_utils_serve_the_device_module_functions(self):
        import torch_npu.npu.autocast_utils as autocast_utils
        import torch_npu.npu.npu_config as npu_config
        import torch_npu.npu.utils as utils

        for name in ("set_device", "current_device", "synchronize", "stream", "StreamContext", "stress_detect",
                     "set_sync_debug_mode", "ipc_collect", "is_bf16_supported"):
            self.assertIs(getattr(utils, name), getattr(torch.npu, name))
        for name in ("set_option", "set_compile_mode", "get_device_limit", "set_dump"):
            self.assertIs(getattr(npu_config, name), getattr(torch.npu, name))
        for name in ("is_autocast_enabled", "set_autocast_dtype"):
            self.assertIs(getattr(autocast_utils, name), getattr(torch.npu, name))
        self.assertIs(torch_npu.npu.utils, utils)  # reachable as an attribute too

    def test_overflow_checks_follow_the_values(self):
        from torch_npu.npu.utils import is_support_inf_nan, npu_check_overflow

        self.assertTrue(is_support_inf_nan())
        cpu_x, npu_x = create_common_tensor([np.float16, 2, (8, 8)], -1, 1)
        self.assertFalse(npu_check_overflow(npu_x))
        big = npu_x * 60000  # float16 overflows to inf on npu as on cpu
        self.assertEqual(npu_check_overflow(big), not bool(torch.isfinite(cpu_x * 60000).all()))
        self.assertTrue(npu_check_overflow(torch.tensor([1.0, float("nan")], device="npu")))
        self.assertFalse(npu_check_overflow(torch.arange(4, device="npu")))
        self.assertTrue(npu_check_overflow(float("inf")))
        with self.assertRaises(TypeError):
            npu_check_overflow("grad")

    def test_device_limit_keyword_forms_and_health_answers(self):
        props = torch.npu.get_device_properties(device_name=0)
        self.assertEqual(torch.npu.get_device_name(device_name=0), props.name)
        torch.npu.set_device_limit(0, cube_num=2)
        self.assertEqual(torch.npu.get_device_limit(0)["cube_core_num"], 2)
        torch.npu.set_device_limit(device=0, cube_num=props.cube_core_num)
        with self.assertRaisesRegex(TypeError, r"set_device_limit\(device"):
            torch.npu.set_device_limit(0, cores=3)
        self.assertEqual(torch.npu.stress_detect("hccs"), 0)
        with self.assertRaises(ValueError):
            torch.npu.stress_detect("gpu")
        self.assertTrue(torch.npu.can_device_access_peer(device_id=0, peer_device_id=1)
                        if torch.npu.device_count() > 1 else True)


class TestGradScalerAndAutocast(TestCase):
    def _train(self, device, scaler, steps=6):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 3).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        torch.manual_seed(1)
        data = [(torch.randn(5, 4), torch.randn(5, 3)) for _ in range(steps)]
        scales = []
        for i, (x, y) in enumerate(data):
            loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
            if i == 2:
                loss = loss * float("inf")  # one overflowing step: it must be skipped
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        return [p.detach().cpu() for p in model.parameters()], scales

    def test_dynamic_scaler_trains_as_torch_amp_grad_scaler_on_cpu(self):
        from torch_npu.npu.amp.grad_scaler import GradScaler

        npu_params, npu_scales = self._train("npu", GradScaler(init_scale=1024.0, growth_interval=2))
        cpu_params, cpu_scales = self._train("cpu", torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=2))
        self.assertEqual(npu_scales, cpu_scales)
        for a, b in zip(npu_params, cpu_params):
            self.assertRtolEqual(b, a)

    def test_static_scaler_keeps_its_scale_and_still_skips_overflow(self):
        from torch_npu.npu.amp import GradScaler

        params, scales = self._train("npu", GradScaler(init_scale=512.0, dynamic=False))
        self.assertEqual(scales, [512.0] * 6)
        # A cpu reference with a fixed scale: torch's scaler fed the same scale back each step.
        reference = torch.amp.GradScaler("cpu", init_scale=512.0)
        reference_update = reference.update
        reference.update = lambda new_scale=None: reference_update(512.0)
        cpu_params, cpu_scales = self._train("cpu", reference)
        self.assertEqual(cpu_scales, scales)
        for a, b in zip(params, cpu_params):
            self.assertRtolEqual(b, a)
        scaler = GradScaler(dynamic=False)
        self.assertFalse(scaler.get_npu_overflow_flag())
        scaler.clear_npu_overflow_flag()
        with self.assertRaises(TypeError):
            GradScaler(dynamic="yes")

    def test_autocast_defaults_to_float16(self):
        from torch_npu.npu.amp.autocast_mode import autocast
        from torch_npu.npu.amp.common import amp_definitely_not_available

        cpu_a, npu_a = create_common_tensor([np.float32, 2, (4, 8)], -1, 1)
        with autocast():
            out = npu_a @ npu_a.t()
        self.assertEqual(out.dtype, torch.float16)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
            expected = (cpu_a.half().float() @ cpu_a.half().float().t()).half()
        self.assertRtolEqual(expected, out.cpu())
        self.assertFalse(amp_definitely_not_available())


class TestStreamsEventsAndMarkers(TestCase):
    def test_stream_and_event_methods(self):
        s = torch.npu.Stream()
        with torch.npu.stream(s):
            y = torch.ones(3, device="npu") * 2
        s.synchronize()
        self.assertTrue(s.query())
        self.assertRtolEqual(torch.full((3,), 2.0), y)
        self.assertFalse(s.is_data_preprocess_stream)
        s.set_data_preprocess_stream(True)
        self.assertTrue(torch.npu.Stream(stream_id=s.stream_id, device_index=s.device_index,
                                         device_type=s.device_type).is_data_preprocess_stream)
        with self.assertRaises(TypeError):
            s.set_data_preprocess_stream(1)
        a, b = torch.npu.Event(enable_timing=True), torch.npu.Event(enable_timing=True)
        a.record()
        torch.ones(1000, device="npu").sum()
        b.record()
        b.synchronize()
        self.assertTrue(b.query())
        self.assertGreaterEqual(b.recorded_time(), a.recorded_time())
        with self.assertRaisesRegex(RuntimeError, "enable_timing"):
            torch.npu.Event().recorded_time()
        with self.assertRaisesRegex(RuntimeError, "recorded"):
            torch.npu.Event(enable_timing=True).recorded_time()

    def test_external_event_orders_work_across_streams(self):
        producer, consumer = torch.npu.Stream(), torch.npu.Stream()
        event = torch_npu.npu.ExternalEvent()
        event.wait(consumer)  # nothing recorded yet: no wait
        with torch.npu.stream(producer):
            x = torch.arange(6.0, device="npu") * 3
        event.record(producer)
        event.wait(consumer)
        with torch.npu.stream(consumer):
            z = x + 1
        consumer.synchronize()
        self.assertRtolEqual(torch.arange(6.0) * 3 + 1, z)
        self.assertTrue(event.query())
        event.reset(consumer)
        self.assertIn("not recorded", repr(event))
        with self.assertRaises(TypeError):
            event.record("stream")

    def test_mstx_push_pop_and_annotate_show_in_profiles(self):
        mstx = torch.npu.mstx
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            self.assertEqual(mstx.range_push("outer"), 0)
            self.assertEqual(mstx.range_push("inner"), 1)
            torch.ones(2, device="npu").sum()
            self.assertEqual(mstx.range_pop(), 1)
            self.assertEqual(mstx.range_pop(), 0)
            self.assertEqual(mstx.range_pop(), -1)
            with mstx.annotate("block"):
                torch.ones(2, device="npu") * 2

            @mstx.annotate()
            def step():
                return torch.ones(2) + 1

            step()
        names = {e.name for e in prof.events()}
        self.assertTrue({"mstx::outer", "mstx::inner", "mstx::block"} <= names, names)
        self.assertTrue(any(n.startswith("mstx::") and "step" in n for n in names), names)
        with self.assertRaises(TypeError):
            mstx.mark(3)


class TestGraphs(TestCase):
    def test_auto_dispatch_capture_replays_and_debug_dump_describes_the_graph(self):
        import tempfile

        static_in = torch.randn(8, device="npu")
        g = torch.npu.NPUGraph()
        torch.npu.synchronize()
        with torch.npu.graph(g, auto_dispatch_capture=True):
            static_out = static_in.sin() * 2
        new = torch.randn(8)
        static_in.copy_(new.npu())
        g.replay()
        self.assertRtolEqual(new.sin() * 2, static_out.cpu())
        path = os.path.join(tempfile.mkdtemp(), "graph.txt")
        g.debug_dump(path)
        with open(path) as f:
            text = f.read()
        self.assertIn(f"nodes={g.num_nodes()}", text)
        self.assertGreater(g.num_nodes(), 0)
        g.super_kernel_optimize({"level": 1})
        with self.assertRaises(TypeError):
            g.super_kernel_optimize("fast")
        with self.assertRaisesRegex(RuntimeError, "simulated NPU"):
            g.update({"actual_seq_lengths": [1]})
        with self.assertRaises(ValueError):
            g.debug_dump("/no/such/dir/graph.txt")
        with self.assertRaises(TypeError):
            torch.npu.graph(g, auto_dispatch_capture="yes")
        torch_npu.npu.graphs.super_kernel_scope_begin("scope")
        torch_npu.npu.graphs.super_kernel_scope_end("scope")
        with self.assertRaises(TypeError):
            torch.npu.super_kernel_scope_begin(3)

    def test_task_group_update_changes_what_replays_compute(self):
        cpu_q, q = create_common_tensor([np.float32, 2, (2, 4, 8)], -1, 1)
        cpu_k, k = create_common_tensor([np.float32, 2, (2, 6, 8)], -1, 1)

        def masked_scores(query, key, length, out=None):
            # Attention scores over the first `length` keys, the others set to 0.
            scores = torch.matmul(query, key.transpose(1, 2))
            keep = torch.arange(key.shape[1], device=key.device) < length
            return torch.where(keep, scores, torch.zeros((), device=key.device), out=out)

        out = torch.empty(2, 4, 6, device="npu")
        g = torch.npu.NPUGraph()
        torch.npu.synchronize()
        with torch.npu.graph(g):
            capture_stream = torch.npu.current_stream()
            torch.npu.graph_task_group_begin(capture_stream)
            masked_scores(q, k, 3, out=out)
            handle = torch.npu.graph_task_group_end(capture_stream)
            total = out.sum(-1)
        g.replay()
        self.assertRtolEqual(masked_scores(cpu_q, cpu_k, 3), out.cpu())
        update_stream = torch.npu.Stream()
        with torch.npu.stream(update_stream):
            torch.npu.graph_task_update_begin(update_stream, handle)
            masked_scores(q, k, 5, out=out)
            torch.npu.graph_task_update_end(update_stream)
        self.assertRtolEqual(masked_scores(cpu_q, cpu_k, 3), out.cpu())  # recorded, not run
        for length in (5, 2):
            if length == 2:
                with torch.npu.stream(update_stream):
                    torch.npu.graph_task_update_begin(update_stream, handle)
                    masked_scores(q, k, 2, out=out)
                    torch.npu.graph_task_update_end(update_stream)
            g.replay()
            torch.npu.synchronize()
            expected = masked_scores(cpu_q, cpu_k, length)
            self.assertRtolEqual(expected, out.cpu())
            self.assertRtolEqual(expected.sum(-1), total.cpu())  # later tasks read the update

        with self.assertRaisesRegex(RuntimeError, "not capturing"):
            torch.npu.graph_task_group_begin(torch.npu.current_stream())
        with self.assertRaisesRegex(RuntimeError, "no update is open"):
            torch.npu.graph_task_update_end(torch.npu.current_stream())
        with self.assertRaisesRegex(RuntimeError, "current stream"):
            torch.npu.graph_task_update_begin(update_stream, handle)
        with self.assertRaises(TypeError):
            torch.npu.graph_task_update_begin(torch.npu.current_stream(), "handle")


class TestNpugraphEx(TestCase):
    def test_compile_fx_patterns_scopes_and_cache(self):
        import io
        import tempfile

        from torch.fx.experimental.proxy_tensor import make_fx

        from torch_npu.npu import npugraph_ex

        def f(x, y):
            return torch.sigmoid(x * 2) + y

        cpu_x, x = create_common_tensor([np.float32, 2, (4, 4)], -2, 2)
        cpu_y, y = create_common_tensor([np.float32, 2, (4, 4)], -2, 2)
        expected = f(cpu_x, cpu_y)
        compiled = npugraph_ex.compile_fx(make_fx(f)(x, y), [x, y], options={"optimize_fx": True})
        self.assertRtolEqual(expected, compiled([x, y]).cpu())
        with self.assertRaisesRegex(ValueError, "unknown npugraph_ex option"):
            npugraph_ex.compile_fx(make_fx(f)(x, y), [x, y], options={"fast": True})

        # A registered pattern rewrites the graphs compile_fx compiles.
        def search(a):
            return torch.sigmoid(a)

        def replace(a):
            return 1.0 / (1.0 + torch.exp(-a))

        self.assertTrue(npugraph_ex.register_replacement(search, replace, [torch.empty(4, 4, device="npu")]))
        gm = make_fx(f)(x, y)
        compiled = npugraph_ex.compile_fx(gm, [x, y])
        self.assertNotIn("sigmoid", gm.code)
        self.assertIn("exp", gm.code)
        self.assertRtolEqual(expected, compiled([x, y]).cpu())

        stream = torch.npu.current_stream()
        before = torch.npu.get_stream_limit(stream)
        with npugraph_ex.scope.limit_core_num(2, 3):
            self.assertEqual(torch.npu.get_stream_limit(stream), {"cube_core_num": 2, "vector_core_num": 3})
        self.assertEqual(torch.npu.get_stream_limit(stream), before)
        with npugraph_ex.scope.deterministic(2):
            self.assertTrue(torch.are_deterministic_algorithms_enabled())
        self.assertFalse(torch.are_deterministic_algorithms_enabled())

        cached = npugraph_ex.inference.cache_compile(f, cache_dir=tempfile.mkdtemp(), tp_rank=1)
        self.assertRtolEqual(expected, cached(x, y).cpu())
        self.assertTrue(cached.cache_dir.endswith("world0_tp1_pp0"))
        printed = io.StringIO()
        text = npugraph_ex.inference.readable_cache(cached.cache_dir, file=printed)
        self.assertIn("def forward", text)
        self.assertEqual(printed.getvalue().strip(), text.strip())
        with self.assertRaises(FileNotFoundError):
            npugraph_ex.inference.readable_cache("/no/such/cache")
        with self.assertRaises(ValueError):
            npugraph_ex.inference.cache_compile(f, tp_rank=-1)


if __name__ == "__main__":
    run_tests()
