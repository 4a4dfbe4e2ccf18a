"""torch.profiler on npu: npu kernels as device activity (a trace row per stream, each
kernel linked to the CPU op that launched it), device time per op, memory events,
schedules and trace handlers, the marker-only route, and the Ascend torch_npu.profiler
names; compiled kernels and graph replays by name."""
from __future__ import annotations

import json
import os

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

NOT_ENABLED = "PrivateUse1 used in profiler but not enabled"


def _model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).npu()


def _step(model, x):
    model(x).square().mean().backward()


def _npu_events(prof):
    return [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]


def _cpu_rows(prof):
    # Kernels are named after their operators: keep the CPU op rows apart from the kernel rows.
    return {row.key: row for row in prof.key_averages() if row.device_type == DeviceType.CPU}


def test_npu_kernels_are_device_activity_with_device_time_per_op(capfd):
    model, x = _model(), torch.randn(16, 32).npu()
    _step(model, x)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU]) as prof:
        for _ in range(3):
            _step(model, x)
    kernels = _npu_events(prof)
    names = {e.name for e in kernels}
    assert {"aten::addmm", "aten::relu", "aten::mm"} <= names, names
    assert all(e.device_index == 0 for e in kernels)
    assert all(e.time_range.end >= e.time_range.start for e in kernels)

    assert sum(e.name == "aten::addmm" for e in kernels) == 6  # two linears, three steps
    averages = _cpu_rows(prof)
    addmm = averages["aten::addmm"]
    assert addmm.device_time_total > 0
    assert 0 < addmm.device_time_total <= addmm.cpu_time_total
    total_cpu = sum(row.self_cpu_time_total for row in averages.values())
    assert 0 < total_cpu < 60e6  # microseconds: sane, not the -1.5e18 of an unset clock
    assert "npuLaunchKernel" in averages  # the host side of each launch
    out, err = capfd.readouterr()
    assert NOT_ENABLED not in out + err


def test_chrome_trace_has_a_row_per_stream_and_flows_to_cpu_ops(tmp_path):
    a = torch.randn(64, 64, device="npu")
    side = torch.npu.Stream()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU]) as prof:
        b = a @ a
        side.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(side):
            c = torch.sigmoid(a)
        torch.npu.current_stream().wait_stream(side)
        d = (b + c).cpu()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]

    kernels = [e for e in events if e.get("cat") == "kernel"]
    by_name = {e["name"]: e for e in kernels}
    assert {"aten::mm", "aten::sigmoid", "aten::add"} <= set(by_name), set(by_name)
    assert by_name["aten::mm"]["tid"] == 0 and by_name["aten::sigmoid"]["tid"] == side.stream_id
    assert by_name["aten::mm"]["pid"] == by_name["aten::sigmoid"]["pid"] == 0
    assert all(k["args"]["device"] == 0 and k["dur"] >= 0 for k in kernels)
    copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
    assert [e["name"] for e in copies] == ["Memcpy DtoH"]

    # Rows are named: the npu device, and each of its streams.
    meta = [e for e in events if e.get("ph") == "M"]
    assert any(e["name"] == "process_name" and e["pid"] == 0 and e["args"]["name"] == "NPU 0" for e in meta)
    thread_names = {e["tid"]: e["args"]["name"] for e in meta if e["name"] == "thread_name" and e["pid"] == 0}
    assert thread_names[0] == "Stream 0 (default)" and thread_names[side.stream_id] == f"Stream {side.stream_id}"

    # Each kernel points at the CPU op that launched it, and a flow arrow joins the two.
    cpu_ops = {e["args"]["External id"]: e for e in events if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
    mm = by_name["aten::mm"]
    assert cpu_ops[mm["args"]["External id"]]["name"] == "aten::mm"
    flows = [e for e in events if e.get("cat") == "ac2g"]
    assert {e["ph"] for e in flows} == {"s", "f"}
    assert any(e["ph"] == "f" and e["id"] == mm["args"]["correlation"] for e in flows)
    torch.testing.assert_close(d, (a @ a + torch.sigmoid(a)).cpu())


def test_profile_memory_reports_npu_allocations(tmp_path):
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU], profile_memory=True) as prof:
        x = torch.empty(1024, 1024, device="npu")
        y = x.add(1)
        del x
    # In the trace: npu memory events with the allocator's totals after each of them.
    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    trace = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    npu_memory = [e["args"] for e in trace if e.get("name") == "[memory]"
                  and e["args"]["Device Type"] == int(DeviceType.PrivateUse1)]
    big = [(m["Bytes"], m["Total Allocated"] - m["Bytes"]) for m in npu_memory if abs(m["Bytes"]) == 4 << 20]
    assert [b for b, _ in big] == [4 << 20, 4 << 20, -(4 << 20)]
    assert all(m["Device Id"] == 0 and m["Total Reserved"] >= m["Total Allocated"] for m in npu_memory)
    assert big[1][1] - big[0][1] >= 4 << 20  # the second allocation comes on top of the first
    # Allocations inside an op count for the op; the free of x, outside any op, is an event.
    memory = [e for e in prof.events() if e.name == "[memory]"]
    assert [e.device_memory_usage for e in memory if e.device_memory_usage != 0] == [-(4 << 20)]
    rows = _cpu_rows(prof)
    assert rows["aten::empty"].device_memory_usage >= 4 * 1024 * 1024
    assert rows["aten::add"].device_memory_usage >= 4 * 1024 * 1024
    del y


def test_schedule_and_tensorboard_trace_handler(tmp_path):
    model, x = _model(), torch.randn(4, 32).npu()
    sched = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    handler = torch.profiler.tensorboard_trace_handler(str(tmp_path), worker_name="w")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU], schedule=sched, on_trace_ready=handler) as prof:
        for _ in range(5):
            _step(model, x)
            prof.step()
    files = sorted(os.listdir(tmp_path))
    assert len(files) == 1 and files[0].startswith("w.") and files[0].endswith(".pt.trace.json")
    events = json.loads((tmp_path / files[0]).read_text())["traceEvents"]
    addmm = [e for e in events if e.get("cat") == "kernel" and e["name"] == "aten::addmm"]
    assert len(addmm) == 2 * 2  # two linears in each of the two active steps


def test_marker_route_without_kineto(capfd):
    model, x = _model(), torch.randn(8, 32).npu()
    with torch.autograd.profiler.profile(use_device="npu") as prof:
        model(x).sum()
    rows = _cpu_rows(prof)
    assert rows["aten::addmm"].device_time_total > 0
    assert 0 < rows["aten::addmm"].cpu_time_total < 60e6
    out, err = capfd.readouterr()
    assert NOT_ENABLED not in out + err


def test_graph_replay_and_compiled_kernels_show_by_name():
    static_x = torch.ones(32, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        static_y = static_x.mul(3).add(1)
    fn = torch.compile(lambda a: (a.cos() * 2).sum(), backend="inductor")
    fn(static_x)
    compiled_graph = torch.npu.NPUGraph()  # a replay of Inductor's kernels (Python host kernels)
    with torch.npu.graph(compiled_graph):
        static_sum = fn(static_x)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU]) as prof:
        g.replay()
        fn(static_x)
        compiled_graph.replay()
    events = list(prof.events())
    replay = [e for e in events if e.name == "NPUGraph.replay"]
    assert len(replay) == 2
    kernels_of_replay = {k.name for k in replay[0].kernels}
    assert {"aten::mul", "aten::add"} <= kernels_of_replay
    assert any(k.name.startswith("cpp_fused") for k in replay[1].kernels), [k.name for k in replay[1].kernels]
    compiled_graph.replay()  # unwatched: the direct path
    torch.testing.assert_close(static_sum.cpu(), (torch.ones(32).cos() * 2).sum())
    compiled = [e for e in _npu_events(prof) if e.name.startswith("cpp_fused")]
    assert compiled, sorted({e.name for e in _npu_events(prof)})
    assert any(e.name == compiled[0].name for e in events if e.device_type == DeviceType.CPU)
    torch.testing.assert_close(static_y.cpu(), torch.full((32,), 4.0))


def test_torch_npu_profiler_names_for_ascend_scripts(tmp_path):
    import torch_npu

    tp = torch_npu.profiler
    assert tp.ProfilerActivity is torch.profiler.ProfilerActivity
    assert tp.ProfilerActivity.NPU == torch.profiler.ProfilerActivity.PrivateUse1
    assert tp.supported_activities() == {tp.ProfilerActivity.CPU, tp.ProfilerActivity.NPU}
    cfg = tp._ExperimentalConfig(
        export_type=tp.ExportType.Text,
        profiler_level=tp.ProfilerLevel.Level1,
        aic_metrics=tp.AiCMetrics.PipeUtilization,
        l2_cache=False,
        msprof_tx=False,
        data_simplification=False,
        record_op_args=False,
        op_attr=False,
    )
    model, x = _model(), torch.randn(4, 32).npu()
    with tp.profile(
        activities=[tp.ProfilerActivity.CPU, tp.ProfilerActivity.NPU],
        schedule=tp.schedule(wait=0, warmup=0, active=1, repeat=1, skip_first=1),
        on_trace_ready=tp.tensorboard_trace_handler(str(tmp_path)),
        record_shapes=True,
        profile_memory=True,
        with_stack=False,
        experimental_config=cfg,
    ) as prof:
        for _ in range(3):
            _step(model, x)
            prof.step()
    assert prof.npu_experimental_config is cfg
    (trace,) = os.listdir(tmp_path)
    events = json.loads((tmp_path / trace).read_text())["traceEvents"]
    assert any(e.get("cat") == "kernel" and e["name"] == "aten::addmm" for e in events)

    with pytest.raises(ValueError, match="profiler_level"):
        tp._ExperimentalConfig(profiler_level="Level9")
    with pytest.raises(ValueError, match="use_cuda"):
        tp.profile(use_cuda=True)
    with pytest.warns(UserWarning, match="ExportType.Db"):
        tp.profile(experimental_config=tp._ExperimentalConfig(export_type=tp.ExportType.Db))
    assert tp.schedule(1, 2)(0) == torch.profiler.ProfilerAction.NONE  # Ascend's positional order: wait, active
