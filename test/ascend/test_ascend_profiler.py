"""torch_npu.profiler as Ascend scripts use it: the module layout of the listing, Ascend's
schedule against torch.profiler's, child-thread profiling, trace ids, offline ``analyse``,
and dynamic profiling driven by an edited ``profiler_config.json`` in a real training loop."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import threading

import pytest
import torch

import torch_npu
from torch_npu.profiler import dynamic_profile as dp

CPU_NPU = [torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU]


@pytest.fixture
def fresh_dynamic_profile():
    dp._controller.shutdown()
    yield
    dp._controller.shutdown()


def test_listing_module_layout_names_the_same_objects():
    from torch_npu.profiler import experimental_config, profiler, profiler_interface, scheduler

    assert profiler.profile is torch_npu.profiler.profile
    assert scheduler.Schedule is torch_npu.profiler.schedule
    assert scheduler.ProfilerAction is torch.profiler.ProfilerAction
    assert experimental_config._ExperimentalConfig is torch_npu.profiler._ExperimentalConfig
    assert profiler_interface.supported_activities() == profiler.supported_activities() == set(CPU_NPU)
    assert experimental_config.supported_export_type() == {"text", "db"}
    assert torch_npu.profiler._ExperimentalConfig().aic_metrics == experimental_config.AiCMetrics.PipeUtilization
    with pytest.raises(ValueError, match="profiler_level"):
        torch_npu.profiler._ExperimentalConfig(profiler_level="Level9")


@pytest.mark.parametrize("kwargs", [
    dict(wait=1, active=2), dict(wait=2, warmup=1, active=3, repeat=2, skip_first=1),
    dict(wait=3, warmup=1, active=1, repeat=3, skip_first_wait=1),
])
def test_schedule_matches_torch_schedule(kwargs):
    ours = torch_npu.profiler.schedule(**kwargs)
    reference = torch.profiler.schedule(**{"warmup": 0, **kwargs})
    assert [ours(step) for step in range(30)] == [reference(step) for step in range(30)]
    with pytest.raises(ValueError, match="active"):
        torch_npu.profiler.schedule(wait=1, active=0)
    with pytest.raises(ValueError, match="skip_first_wait"):
        torch_npu.profiler.schedule(wait=1, active=1, skip_first_wait=-1)


def test_profile_is_keyword_only_like_ascend():
    with pytest.raises(TypeError):
        torch_npu.profiler.profile(CPU_NPU)


def _run_child_thread_work():
    def worker():
        with torch.profiler.record_function("child_thread_work"):
            torch.ones(8, device="npu").mul(2)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()


def _recorded(prof, name):
    return any(event.key == name for event in prof.key_averages())


def test_child_thread_profiling_enable_and_disable():
    profile = torch_npu.profiler.profile
    try:
        profile.enable_profiler_in_child_thread(record_shapes=True)
        with profile(activities=CPU_NPU) as prof:
            _run_child_thread_work()
        assert _recorded(prof, "child_thread_work")
        assert prof.record_shapes  # the child-thread options apply to the session
    finally:
        profile.disable_profiler_in_child_thread()
    with profile(activities=CPU_NPU) as prof:
        _run_child_thread_work()
    assert not _recorded(prof, "child_thread_work")
    assert not prof.record_shapes


def test_custom_trace_id_callback_and_get_trace_id():
    prof = torch_npu.profiler.profile(activities=CPU_NPU, custom_trace_id_callback=lambda: "trace-one")
    with prof:
        torch.ones(2, device="npu").add(1)
    assert prof.get_trace_id() == "trace-one"
    prof.set_custom_trace_id_callback(lambda: "trace-two")
    with prof:
        torch.ones(2, device="npu").add(1)
    assert prof.get_trace_id() == "trace-two"


def test_analyse_checks_a_result_directory(tmp_path):
    from torch_npu.profiler.profiler import analyse

    with pytest.raises(FileNotFoundError, match="no profiler trace"):
        analyse(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="not a profiling result"):
        analyse(str(tmp_path / "missing"))
    with torch_npu.profiler.profile(activities=CPU_NPU,
                                    on_trace_ready=torch_npu.profiler.tensorboard_trace_handler(str(tmp_path))):
        torch.ones(2, device="npu").add(1)
    assert analyse(str(tmp_path), export_type="text") is None
    with pytest.raises(ValueError, match="export_type"):
        analyse(str(tmp_path), export_type="csv")
    with pytest.raises(ValueError, match="max_process_number"):
        analyse(str(tmp_path), max_process_number=0)


class _Trainer:
    """A small real training loop on npu, matched step by step by the same loop on cpu."""

    def __init__(self):
        torch.manual_seed(0)
        self.cpu_model = torch.nn.Linear(8, 4)
        self.npu_model = torch.nn.Linear(8, 4).npu()
        self.npu_model.load_state_dict(self.cpu_model.state_dict())
        self.cpu_opt = torch.optim.SGD(self.cpu_model.parameters(), lr=0.1)
        self.npu_opt = torch.optim.SGD(self.npu_model.parameters(), lr=0.1)
        self.generator = torch.Generator().manual_seed(1)

    def train_step(self):
        x = torch.randn(16, 8, generator=self.generator)
        y = torch.randn(16, 4, generator=self.generator)
        for model, opt, device in ((self.cpu_model, self.cpu_opt, "cpu"), (self.npu_model, self.npu_opt, "npu")):
            opt.zero_grad()
            with torch.profiler.record_function("train_step"):
                loss = torch.nn.functional.mse_loss(model(x.to(device)), y.to(device))
                loss.backward()
                opt.step()

    def assert_same_weights(self):
        assert torch.equal(self.npu_model.weight.detach().cpu(), self.cpu_model.weight.detach())


def _traces(directory):
    return sorted(glob.glob(os.path.join(directory, "*.pt.trace.json")))


def _profiler_steps(trace_path):
    with open(trace_path) as file:
        events = json.load(file)["traceEvents"]
    return sorted({e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#")})


def _edit_config(path, **fields):
    with open(path) as file:
        config = json.load(file)
    config.update(fields)
    with open(path, "w") as file:
        json.dump(config, file, indent=2)


def test_dynamic_profile_collects_when_config_file_is_edited(tmp_path, fresh_dynamic_profile):
    config_dir, out_dir = tmp_path / "cfg", tmp_path / "out"
    dp.init(str(config_dir))
    config_path = config_dir / "profiler_config.json"
    template = json.loads(config_path.read_text())
    assert template["start_step"] == 0 and template["active"] >= 1  # the template is idle
    trainer = _Trainer()
    for _ in range(3):
        trainer.train_step()
        dp.step()
    assert not out_dir.exists()  # nothing collected while the file is untouched
    _edit_config(config_path, start_step=6, warmup=1, active=2, prof_dir=str(out_dir), record_shapes=True)
    for number in range(4, 13):
        trainer.train_step()
        dp.step()
        if number < 6:
            assert not _traces(str(out_dir))  # the request waits for its start step
    traces = _traces(str(out_dir))
    assert len(traces) == 1
    assert len(_profiler_steps(traces[0])) == 2  # the two active steps, not the warmup
    with open(traces[0]) as file:
        names = {e.get("name") for e in json.load(file)["traceEvents"]}
    assert "train_step" in names and "aten::addmm" in names
    trainer.assert_same_weights()  # profiling does not change what training computes
    # A second save is a second request; a start step already passed starts at once.
    _edit_config(config_path, start_step=1, warmup=0, active=1)
    for _ in range(3):
        trainer.train_step()
        dp.step()
    assert len(_traces(str(out_dir))) == 2


def test_dynamic_profile_start_and_bad_config(tmp_path, fresh_dynamic_profile):
    out_dir = tmp_path / "out"
    start_config = tmp_path / "start_config.json"
    start_config.write_text(json.dumps({"prof_dir": str(out_dir), "active": 2, "warmup": 0}))
    trainer = _Trainer()
    dp.start(str(start_config))
    for _ in range(4):
        trainer.train_step()
        dp.step()
    traces = _traces(str(out_dir))
    assert len(traces) == 1 and len(_profiler_steps(traces[0])) == 2
    start_config.write_text(json.dumps({"active": 0}))
    with pytest.warns(UserWarning, match="active must be an int >= 1"):
        dp.start(str(start_config))
    trainer.train_step()
    dp.step()  # training goes on
    config_dir = tmp_path / "cfg"
    dp.init(str(config_dir))
    (config_dir / "profiler_config.json").write_text("{not json")
    with pytest.warns(UserWarning, match="ignored"):
        dp.step()
    with pytest.raises(ValueError, match="give config_path"):
        dp._DynamicProfiler().start(None)


def test_dynamic_profile_rank_filter_and_set_state(tmp_path, fresh_dynamic_profile, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    out_dir = tmp_path / "out"
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"prof_dir": str(out_dir), "is_rank": True, "rank_list": [0]}))
    dp.start(str(config))
    dp.step()
    dp.step()
    assert not out_dir.exists()  # rank 1 is not in rank_list
    dp.set_state({"step": 100})
    assert dp._controller.step_number == 100
    with pytest.raises(ValueError, match="unknown keys"):
        dp.set_state({"epoch": 1})


def test_profiler_stays_lazy_at_import():
    code = ("import sys, torch, torch_npu; "
            "print(sorted(m for m in sys.modules if m.startswith('torch_npu.profiler'))); "
            "import torch_npu.profiler; "
            "print('torch_npu.profiler.dynamic_profile' in sys.modules)")
    env = dict(os.environ, TORCH_NPU_MEMORY_CAPACITY_MB="256")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                         cwd=os.path.dirname(os.path.dirname(torch_npu.__file__)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["[]", "False"]


def test_dynamic_profile_collection_running_at_exit_is_written(tmp_path):
    out_dir = tmp_path / "out"
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"prof_dir": str(out_dir), "active": 50}))
    code = ("import torch, torch_npu\n"
            "from torch_npu.profiler import dynamic_profile as dp\n"
            f"dp.start({str(config)!r})\n"
            "for _ in range(3):\n"
            "    with torch.profiler.record_function('exit_step'):\n"
            "        torch.ones(4, device='npu').add(1)\n"
            "    dp.step()\n")
    env = dict(os.environ, TORCH_NPU_MEMORY_CAPACITY_MB="256")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                         cwd=os.path.dirname(os.path.dirname(torch_npu.__file__)))
    assert out.returncode == 0, out.stderr
    traces = _traces(str(out_dir))
    assert len(traces) == 1
    with open(traces[0]) as file:
        recorded = [e for e in json.load(file)["traceEvents"] if e.get("name") == "exit_step"]
    assert len(recorded) == 3  # every step run before exit is in the trace


def test_dynamic_profile_start_while_another_profiler_runs(tmp_path, fresh_dynamic_profile):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"prof_dir": str(tmp_path / "out"), "active": 1}))
    with torch_npu.profiler.profile(activities=CPU_NPU):
        with pytest.warns(UserWarning, match="could not start"):
            dp.start(str(config))
        dp.step()  # training goes on
