"""The npu stream sanitizer: each kind of race is found and reported with both stacks and
the tensor; correct multi-stream code (events, wait_stream, record_stream, synchronize)
reports nothing; graph replays, compiled kernels and announced collectives are checked."""
from __future__ import annotations

import gc

import pytest
import torch

from fresh_interpreter import run_python


def _single_error(excinfo):
    errors = excinfo.value.errors
    assert len(errors) == 1, [str(e) for e in errors]
    return errors[0]


def _lines(stack):
    return [(frame.name, frame.lineno) for frame in stack]


def test_off_by_default():
    import torch.npu._sanitizer as san

    assert not san.is_enabled()
    s = torch.npu.Stream()
    x = torch.ones(4, device="npu")
    with torch.npu.stream(s):
        x.mul_(2)  # a race, but nobody is watching
    x.add_(1)
    torch.testing.assert_close(x.cpu(), torch.full((4,), 3.0))


def test_read_after_write_on_another_stream(sanitizer):
    side = torch.npu.Stream()
    x = torch.zeros(16, 8, device="npu")
    side.wait_stream(torch.npu.current_stream())  # the zeros are ready for the side stream
    with torch.npu.stream(side):
        x.add_(1)  # written on the side stream
    with pytest.raises(sanitizer.NPUSanitizerErrors) as excinfo:
        x.sum()  # read on the default stream without waiting for the side stream
    error = _single_error(excinfo)
    assert isinstance(error, sanitizer.UnsynchronizedAccessError)
    assert error.tensor.startswith("Float[16, 8]") and "npu:0" in error.tensor
    assert error.data_ptr == x.untyped_storage().data_ptr()
    assert error.current_access.operator == "aten::sum"
    assert error.current_access.type is sanitizer.AccessType.READ
    assert "stream 0" in error.current_access.stream
    assert error.previous_access.operator == "aten::add_"
    assert error.previous_access.type is sanitizer.AccessType.WRITE
    assert f"stream {side.stream_id}" in error.previous_access.stream
    # Both stacks end in this test, at the line of each access; the allocation is known.
    assert _lines(error.current_access.stack_trace)[-1][0] == "test_read_after_write_on_another_stream"
    assert _lines(error.previous_access.stack_trace)[-1][0] == "test_read_after_write_on_another_stream"
    assert _lines(error.current_access.stack_trace)[-1][1] > _lines(error.previous_access.stack_trace)[-1][1]
    assert error.allocation_stack_trace is not None
    assert "test_read_after_write_on_another_stream" in str(error)
    assert "wait_stream" in str(error)  # the report says how to fix it


def test_write_after_read_on_another_stream(sanitizer):
    side = torch.npu.Stream()
    w = torch.ones(8, device="npu")
    y = w * 2  # read on the default stream
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        w.zero_()  # ordered after the read: fine
    del y
    with pytest.raises(sanitizer.NPUSanitizerErrors) as excinfo:
        w.fill_(3.0)  # default stream writes what the side stream wrote, without waiting
    error = _single_error(excinfo)
    assert error.current_access.type is sanitizer.AccessType.WRITE
    assert error.current_access.argument == "self"
    assert error.previous_access.operator == "aten::zero_"

    other = torch.npu.Stream()
    v = torch.ones(8, device="npu")
    torch.npu.synchronize()
    with torch.npu.stream(other):
        r = v + 1  # the other stream reads v
    with pytest.raises(sanitizer.NPUSanitizerErrors) as excinfo:
        v.mul_(5)  # write after read, unordered
    error = _single_error(excinfo)
    assert error.previous_access.type is sanitizer.AccessType.READ
    assert error.previous_access.operator == "aten::add"
    del r


def test_free_while_another_stream_uses_it(sanitizer):
    side = torch.npu.Stream()
    x = torch.randn(32, device="npu")  # allocated on the default stream
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        y = x * 3  # used on the side stream
    del x  # freed: the default stream could reuse the block before the side stream is done
    gc.collect()
    with pytest.raises(sanitizer.NPUSanitizerErrors) as excinfo:
        torch.ones(2, device="npu").add_(1)  # a free cannot raise: the next npu work does
    error = _single_error(excinfo)
    assert isinstance(error, sanitizer.FreedWhileInUseError)
    assert "stream 0" in error.allocation_stream
    assert f"stream {side.stream_id}" in error.last_use.stream
    assert error.last_use.operator == "aten::mul"
    assert _lines(error.free_stack_trace)[-1][0] == "test_free_while_another_stream_uses_it"
    assert _lines(error.allocation_stack_trace)[-1][0] == "test_free_while_another_stream_uses_it"
    assert "record_stream" in str(error)
    del y


def test_free_on_another_thread_is_reported_where_the_memory_is_used_again(sanitizer):
    import threading

    side = torch.npu.Stream()
    box = [torch.randn(8, device="npu")]
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        box[0].add_(1)
    freer = threading.Thread(target=box.clear)
    freer.start()
    freer.join()
    sanitizer.check()  # nothing yet: the memory was not handed out again
    with pytest.raises(sanitizer.NPUSanitizerErrors) as excinfo:
        torch.zeros(8, device="npu")  # allocated on the default stream, written there
    error = _single_error(excinfo)
    assert isinstance(error, sanitizer.FreedWhileInUseError)
    assert error.reuse.operator == "aten::zero_" and "stream 0" in error.reuse.stream
    assert f"stream {side.stream_id}" in error.last_use.stream
    torch.zeros(8, device="npu")  # reported once


def test_free_is_fine_when_the_allocation_stream_waits_before_allocating_again(sanitizer):
    # FSDP2's reduce-scatter outputs: allocated on a side stream, used on the default stream
    # (the optimizer), freed there (zero_grad); the side stream waits for the default
    # stream before it allocates again.
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        grad = torch.ones(64, device="npu")
    torch.npu.current_stream().wait_stream(side)
    (grad * 2).sum()  # used on the default stream
    del grad
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        torch.ones(64, device="npu").add_(1)
    sanitizer.check()


def test_tensors_allocated_in_backward_name_their_node_and_forward_stack(sanitizer):
    x = torch.randn(8, 8, device="npu", requires_grad=True)
    y = x * 2  # forward of the node whose backward allocates x's gradient
    y.sum().backward()
    grad = x.grad
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        grad.add_(1)
    with pytest.raises(sanitizer.NPUSanitizerErrors) as excinfo:
        grad.sum()
    error = _single_error(excinfo)
    assert error.allocation_backward_node == "MulBackward0"
    name, line = _lines(error.allocation_stack_trace)[-1]
    assert name == "test_tensors_allocated_in_backward_name_their_node_and_forward_stack"
    assert "y = x * 2" in error.allocation_stack_trace[-1].line
    assert "allocated in backward by the autograd engine running MulBackward0" in str(error)
    assert "allocated before the sanitizer was enabled" not in str(error)


def test_correct_multi_stream_code_reports_nothing(sanitizer):
    main = torch.npu.current_stream()
    side = torch.npu.Stream()
    x = torch.randn(64, 64, device="npu")

    # wait_stream both ways around side-stream work
    side.wait_stream(main)
    with torch.npu.stream(side):
        y = x @ x
    main.wait_stream(side)
    z = y.relu() + x
    y.record_stream(main)  # allocated on side, used on main
    del y

    # an event recorded on one stream and waited for on another
    done = torch.npu.Event()
    with torch.npu.stream(side):
        side.wait_stream(main)
        w = z * 2
        done.record(side)
    main.wait_event(done)
    w.add_(z)
    w.record_stream(main)
    del w

    # a host synchronisation orders everything
    with torch.npu.stream(side):
        v = z.sum(0)
    torch.npu.synchronize()
    z.mul_(2)
    v2 = v + 1
    torch.npu.synchronize()  # v was allocated on side and read on main: order before the free
    del v

    # record_stream instead of an ordering before the free
    t = torch.ones(16, device="npu")
    side.wait_stream(main)
    with torch.npu.stream(side):
        u = t * 4
    t.record_stream(side)
    main.wait_stream(side)
    del t
    gc.collect()
    u.add_(1)
    u.record_stream(main)  # allocated on side, last used on main
    v2.cpu()
    del u
    sanitizer.check()


def test_multi_stream_training_step_reports_nothing(sanitizer):
    """Prefetching inputs on a side stream around a training step, done correctly."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    copy_stream = torch.npu.Stream()
    batches = [torch.randn(8, 16) for _ in range(4)]
    main = torch.npu.current_stream()
    with torch.npu.stream(copy_stream):
        nxt = batches[0].to("npu", non_blocking=True)
    for i in range(len(batches)):
        main.wait_stream(copy_stream)
        x = nxt
        x.record_stream(main)
        if i + 1 < len(batches):
            with torch.npu.stream(copy_stream):
                nxt = batches[i + 1].to("npu", non_blocking=True)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert torch.isfinite(loss.detach().cpu())
    sanitizer.check()


def test_graph_replay_is_checked(sanitizer):
    static_x = torch.zeros(8, device="npu")
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        static_y = static_x * 2 + 1
    torch.npu.synchronize()
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        static_x.copy_(torch.arange(8.0, device="npu"))  # new input written on a side stream
    with pytest.raises(sanitizer.NPUSanitizerErrors) as excinfo:
        g.replay()  # the replay reads it on the default stream, unordered
    error = _single_error(excinfo)
    assert error.current_access.operator == "aten::mul"
    assert "stream 0" in error.current_access.stream
    assert error.previous_access.operator == "Memcpy DtoD"

    torch.npu.current_stream().wait_stream(side)
    g.replay()  # ordered now
    torch.testing.assert_close(static_y.cpu(), torch.arange(8.0) * 2 + 1)


def test_replay_of_compiled_kernels_is_checked(sanitizer):
    # The graph of test_profiler.py's compiled replay: served from the FX graph cache.
    fn = torch.compile(lambda a: (a.cos() * 2).sum(), backend="inductor")
    static_x = torch.ones(32, device="npu")
    fn(static_x)
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        static_sum = fn(static_x)
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        static_x.fill_(0.0)
    with pytest.raises(sanitizer.NPUSanitizerErrors) as excinfo:
        g.replay()  # Inductor's kernel reads static_x on the default stream, unordered
    error = _single_error(excinfo)
    assert error.current_access.operator.startswith("cpp_fused"), error.current_access.operator
    assert error.previous_access.operator == "aten::fill_"
    torch.npu.current_stream().wait_stream(side)
    g.replay()
    torch.testing.assert_close(static_sum.cpu(), torch.tensor(64.0))


def test_announced_collective_is_checked(sanitizer):
    comm = torch.npu.Stream()
    grad = torch.ones(128, device="npu")
    grad.mul_(0.5)  # produced on the default stream
    with pytest.raises(sanitizer.NPUSanitizerErrors) as excinfo:
        sanitizer.record_kernel("hccl:all_reduce", reads=[grad], writes=[grad], stream=comm)
    error = _single_error(excinfo)
    assert error.current_access.operator == "hccl:all_reduce"
    assert f"stream {comm.stream_id}" in error.current_access.stream

    comm.wait_stream(torch.npu.current_stream())
    sanitizer.record_kernel("hccl:all_reduce", reads=[grad], writes=[grad], stream=comm)  # ordered: fine
    torch.npu.current_stream().wait_stream(comm)
    grad.div_(2)
    sanitizer.check()


def test_compiled_kernels_are_checked(sanitizer):
    fn = torch.compile(lambda a, b: (a * b).sin() + b, backend="inductor")
    a = torch.randn(64, device="npu")
    b = torch.randn(64, device="npu")
    torch.testing.assert_close(fn(a, b).cpu(), (a.cpu() * b.cpu()).sin() + b.cpu())  # compile, no race
    side = torch.npu.Stream()
    side.wait_stream(torch.npu.current_stream())
    with torch.npu.stream(side):
        b.add_(1)
    with pytest.raises(sanitizer.NPUSanitizerErrors) as excinfo:
        fn(a, b)
    error = _single_error(excinfo)
    assert error.current_access.operator.startswith("cpp_fused")
    assert error.current_access.type is sanitizer.AccessType.READ  # an input pointer (const)
    assert error.previous_access.operator == "aten::add_"


def test_environment_variable_enables_it_and_rejects_bad_values():
    out = run_python(
        """
        import torch, torch_npu
        import torch.npu._sanitizer as san
        print(san.is_enabled())
        s = torch.npu.Stream()
        x = torch.zeros(4, device="npu")
        s.wait_stream(torch.npu.current_stream())
        with torch.npu.stream(s):
            x.add_(1)
        try:
            x.sum()
        except san.NPUSanitizerErrors as e:
            print(type(e.errors[0]).__name__)
        """,
        env={"TORCH_NPU_SANITIZER": "1"},
    )
    assert out.split() == ["True", "UnsynchronizedAccessError"]
    out = run_python(
        """
        try:
            import torch, torch_npu
        except Exception as e:
            print("ERROR", e)
        """,
        env={"TORCH_NPU_SANITIZER": "maybe", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert "TORCH_NPU_SANITIZER='maybe'" in out and "set it to 1" in out


def test_one_module_under_both_names():
    import torch.npu._sanitizer as a
    import torch_npu.npu._sanitizer as b

    assert a.NPUSanitizerErrors is b.NPUSanitizerErrors
    assert torch.npu._sanitizer.enable_npu_sanitizer is a.enable_npu_sanitizer


def test_copy_between_devices_orders_their_streams(sanitizer, two_devices):
    d0, d1 = two_devices
    src = torch.randn(1024, device=d1)
    dst = src.to(d0)  # on npu:0's stream, ordered after npu:1's work and before its next
    del src  # npu:1 may reuse the block at once: the copy is done as far as it can tell
    gc.collect()
    dst.add_(1)
    sanitizer.check()
