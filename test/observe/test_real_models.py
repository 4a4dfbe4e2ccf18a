"""The profiler, the sanitizer and memory history on models we did not write: a torchvision
ResNet and a transformers BERT, trained on the npu as their users train them.

The profile must show their kernels as npu activity charged to their ops, the sanitizer
must stay silent on their correct multi-stream training (and still find a race planted in
it), and the memory history must account for their parameters."""
from __future__ import annotations

import pickle

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import torch.cuda._memory_viz as memory_viz


def _torchvision():
    # The CUDA build of torchvision cannot load its C++ ops here; its pure-Python models
    # import once the schemas its meta registrations refer to exist.
    for name in ("nms", "qnms"):
        try:
            torch.library.define(f"torchvision::{name}", "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        except RuntimeError:
            pass  # already defined
    return pytest.importorskip("torchvision")


def _resnet():
    torchvision = _torchvision()
    torch.manual_seed(0)
    return torchvision.models.resnet18(num_classes=10).npu()


def _bert():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        max_position_embeddings=32, attn_implementation="eager",
    )
    return transformers.BertForSequenceClassification(config).npu()


def _bert_batch(gen):
    ids = torch.randint(0, 100, (4, 16), generator=gen)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.randint(0, 2, (4,), generator=gen)}


def test_resnet_training_step_profiled():
    model = _resnet()
    x = torch.randn(2, 3, 32, 32).npu()
    model(x).sum().backward()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.NPU]) as prof:
        model(x).sum().backward()
    kernels = [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]
    names = {e.name for e in kernels}
    conv, conv_backward = "aten::convolution_overrideable", "aten::convolution_backward_overrideable"
    assert {conv, conv_backward, "aten::max_pool2d_with_indices", "aten::native_batch_norm"} <= names, sorted(names)
    assert sum(e.name == conv for e in kernels) == 20  # resnet18 has 20 convolutions
    rows = {r.key: r for r in prof.key_averages() if r.device_type == DeviceType.CPU}
    assert rows[conv_backward].count == 20 and rows[conv_backward].device_time_total > 0
    assert rows["aten::conv2d"].device_time_total >= rows[conv].device_time_total > 0


def test_resnet_input_race_is_found_at_its_first_convolution(sanitizer):
    model = _resnet()
    side = torch.npu.Stream()
    with torch.npu.stream(side):
        x = torch.randn(2, 3, 32, 32).to("npu", non_blocking=True)
    torch.npu.current_stream().wait_stream(side)
    x.record_stream(torch.npu.current_stream())  # without it, freeing x below is a finding too
    model(x).sum().backward()  # ordered: nothing to report
    sanitizer.check()
    with torch.npu.stream(side):
        x = torch.randn(2, 3, 32, 32).to("npu", non_blocking=True)
    with pytest.raises(sanitizer.NPUSanitizerErrors) as excinfo:
        model(x)
    (error,) = excinfo.value.errors
    assert "aten::convolution_overrideable" in str(error) and "input" in str(error), str(error)
    assert "resnet.py" in str(error), str(error)  # the stack of the access, in torchvision
    torch.npu.synchronize()


def test_bert_training_with_prefetch_stream_is_clean_under_the_sanitizer(sanitizer):
    model = _bert()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    copy_stream, main = torch.npu.Stream(), torch.npu.current_stream()
    gen = torch.Generator().manual_seed(0)
    with torch.npu.stream(copy_stream):
        nxt = {k: v.to("npu", non_blocking=True) for k, v in _bert_batch(gen).items()}
    losses = []
    for _ in range(3):
        main.wait_stream(copy_stream)
        batch = nxt
        for v in batch.values():
            v.record_stream(main)
        with torch.npu.stream(copy_stream):
            nxt = {k: v.to("npu", non_blocking=True) for k, v in _bert_batch(gen).items()}
        loss = model(**batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    sanitizer.check()
    assert all(torch.isfinite(torch.tensor(losses)))

    # The same loop without the wait: the sanitizer finds the race in transformers' code.
    with torch.npu.stream(copy_stream):
        batch = {k: v.to("npu", non_blocking=True) for k, v in _bert_batch(gen).items()}
    with pytest.raises(sanitizer.NPUSanitizerErrors) as excinfo:
        model(**batch)
    error = excinfo.value.errors[0]
    assert isinstance(error, sanitizer.UnsynchronizedAccessError)
    assert "modeling_bert.py" in str(error) or "sparse.py" in str(error), str(error)
    torch.npu.synchronize()


def test_bert_memory_history_accounts_for_its_parameters(tmp_path):
    torch.npu.memory._record_memory_history(max_entries=100_000)
    try:
        model = _bert()
        gen = torch.Generator().manual_seed(0)
        batch = {k: v.npu() for k, v in _bert_batch(gen).items()}
        model(**batch).loss.backward()
        path = tmp_path / "bert.pickle"
        torch.npu.memory._dump_snapshot(str(path))
    finally:
        torch.npu.memory._record_memory_history(enabled=None)
    snapshot = pickle.loads(path.read_bytes())
    assert "total_allocated" in memory_viz.segsum(snapshot)
    param_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    live = sum(b["requested_size"] for s in snapshot["segments"] for b in s["blocks"] if b["state"] == "active_allocated")
    assert live >= 2 * param_bytes  # parameters and their gradients
    allocs = [e for e in snapshot["device_traces"][0] if e["action"] == "alloc"]
    assert any("modeling_bert.py" in f["filename"] for e in allocs for f in e["frames"])
