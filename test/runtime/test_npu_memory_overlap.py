"""Memory overlap on npu follows ATen's rule on cpu: a written tensor that overlaps itself,
or that partially overlaps an input, raises the error cpu raises; full overlap where cpu
allows it (``x.add_(x)``) and views of one storage that do not overlap give cpu's values.
Checked in eager mode and inside an NPU graph capture (which must raise when the
operator is recorded and leave no capture open).

Every case is written once as a function of the device and run on cpu and on npu.
"""
import pytest
import torch

import torch_npu  # noqa: F401  (registers the npu device)


def add_shifted(dev):
    u = torch.arange(6.0, device=dev)
    u[1:].add_(u[:-1])
    return u


def mul_out_shifted(dev):
    y = torch.arange(6.0, device=dev)
    torch.mul(y[:4], 2, out=y[2:])
    return y


def copy_shifted(dev):
    w = torch.arange(6.0, device=dev)
    w[2:].copy_(w[:4])
    return w


def cumsum_out_shifted(dev):
    v = torch.arange(6.0, device=dev)
    torch.cumsum(v[:4], 0, out=v[2:])
    return v


def add_into_expanded(dev):
    x = torch.zeros(1, 3, device=dev).expand(4, 3)
    x.add_(1)
    return x


def add_out_expanded(dev):
    out = torch.zeros(3, device=dev).expand(2, 3)
    torch.add(torch.ones(2, 3, device=dev), 1, out=out)
    return out


def index_select_out_overlapping_input(dev):
    x = torch.arange(8.0, device=dev)
    torch.index_select(x[:4], 0, torch.arange(3, -1, -1, device=dev), out=x[2:6])
    return x


def softmax_out_expanded(dev):
    # softmax's out= path resizes the (already right-sized) out tensor, then copies into it:
    # the resize must keep it expanded for the copy to refuse it.
    out = torch.zeros(1, 4, device=dev).expand(3, 4)
    torch.softmax(torch.ones(3, 4, device=dev), 0, out=out)
    return out


REFUSED = [
    softmax_out_expanded,
    add_shifted,
    mul_out_shifted,
    copy_shifted,
    cumsum_out_shifted,
    add_into_expanded,
    add_out_expanded,
    index_select_out_overlapping_input,
]


def add_itself(dev):
    x = torch.arange(6.0, device=dev)
    x.add_(x)
    return x


def mul_out_itself(dev):
    x = torch.arange(6.0, device=dev)
    torch.mul(x, x, out=x)
    return x


def copy_itself_through_a_view(dev):
    x = torch.arange(6.0, device=dev)
    x[:].copy_(x)
    return x


def add_same_view_twice(dev):
    x = torch.arange(12.0, device=dev)
    x[2:8].add_(x[2:8])
    return x


def add_disjoint_views(dev):
    u = torch.arange(8.0, device=dev)
    u[4:].add_(u[:4])
    return u


def mul_out_disjoint_view(dev):
    y = torch.arange(8.0, device=dev)
    torch.mul(y[:4], 2, out=y[4:])
    return y


def copy_disjoint_views(dev):
    w = torch.arange(8.0, device=dev)
    w[4:].copy_(w[:4])
    return w


def cumsum_out_disjoint_view(dev):
    v = torch.arange(8.0, device=dev)
    torch.cumsum(v[:4], 0, out=v[4:])
    return v


def interleaved_views(dev):
    # Even and odd elements of one storage: separate elements, overlapping address ranges.
    x = torch.arange(8.0, device=dev)
    x[0::2].add_(x[1::2])
    return x


def matmul_out_disjoint_rows(dev):
    m = torch.arange(24.0, device=dev).reshape(6, 4)
    torch.mm(m[:2], m[2:6], out=m[4:6])
    return m


ALLOWED = [
    add_itself,
    mul_out_itself,
    copy_itself_through_a_view,
    add_same_view_twice,
    add_disjoint_views,
    mul_out_disjoint_view,
    copy_disjoint_views,
    cumsum_out_disjoint_view,
    interleaved_views,
    matmul_out_disjoint_rows,
]


def raised(fn, dev):
    with pytest.raises(Exception) as info:
        fn(dev)
    return info.value


@pytest.mark.parametrize("case", REFUSED, ids=lambda f: f.__name__)
def test_refused_overlap_raises_what_cpu_raises(case):
    expected = raised(case, "cpu")
    got = raised(case, "npu")
    assert type(got) is type(expected)
    assert str(got).splitlines()[0] == str(expected).splitlines()[0]
    assert "unsupported operation" in str(got)


@pytest.mark.parametrize("case", ALLOWED, ids=lambda f: f.__name__)
def test_allowed_aliasing_equals_cpu(case):
    assert torch.equal(case("npu").cpu(), case("cpu"))


def test_out_resized_over_the_storage_of_its_input():
    # The out= tensor is an empty view at the end of its input's storage: the kernel grows
    # that shared storage, and both tensors must see the new memory, as on cpu.
    def run(dev):
        buf = torch.arange(8.0, device=dev)
        out = buf[8:]
        torch.add(buf[:3], 10, out=out)
        return buf, out

    buf_cpu, out_cpu = run("cpu")
    buf_npu, out_npu = run("npu")
    assert torch.equal(buf_npu.cpu(), buf_cpu) and torch.equal(out_npu.cpu(), out_cpu)
    assert out_npu.untyped_storage().data_ptr() == buf_npu.untyped_storage().data_ptr()
    assert out_npu.untyped_storage().nbytes() == out_cpu.untyped_storage().nbytes()
    assert out_npu.storage_offset() == out_cpu.storage_offset() == 8


def test_resize_to_the_same_size_keeps_the_strides_as_on_cpu():
    def run(dev):
        expanded = torch.zeros(1, 4, device=dev).expand(3, 4)
        transposed = torch.zeros(4, 3, device=dev).t()
        return [(t.resize_(3, 4).stride(), t.resize_(2, 2).stride()) for t in (expanded, transposed)]

    assert run("npu") == run("cpu")


# ---- inside an NPU graph capture ---------------------------------------------------------


def captured(fn):
    """Captures ``fn("npu")`` into a graph and replays it once; returns its result."""
    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        out = fn("npu")
    g.replay()
    torch.npu.synchronize()
    return out


@pytest.mark.parametrize("case", REFUSED, ids=lambda f: f.__name__)
def test_refused_overlap_raises_at_capture_and_closes_it(case):
    expected = raised(case, "cpu")
    g = torch.npu.NPUGraph()
    with pytest.raises(type(expected)) as info:
        with torch.npu.graph(g):
            case("npu")
    assert str(info.value).splitlines()[0] == str(expected).splitlines()[0]
    assert not torch.npu.is_current_stream_capturing()
    # Nothing was left half-open: the same graph captures and replays afterwards.
    x = torch.zeros(3, device="npu")
    with torch.npu.graph(g):
        x.add_(1)
    g.replay()
    assert torch.equal(x.cpu(), torch.ones(3))


def test_capture_of_aliased_random_op_draws_what_eager_draws():
    # bernoulli writing over its own probabilities: the aliasing is allowed, and the
    # capture-time overlap check of the CPU kernel must not draw random numbers: the
    # replay draws what the eager call draws under the same seed, and leaves the
    # generator where the eager call leaves it.
    def eager(dev):
        p = torch.full((6,), 0.5, device=dev)
        torch.manual_seed(5)
        torch.bernoulli(p, out=p)
        return p, torch.rand(4, device=dev)

    p_cpu, after_cpu = (t.cpu() for t in eager("npu"))
    p = torch.full((6,), 0.5, device="npu")
    g = torch.npu.NPUGraph()
    torch.manual_seed(5)
    with torch.npu.graph(g):
        torch.bernoulli(p, out=p)
    g.replay()
    assert torch.equal(p.cpu(), p_cpu)
    assert torch.equal(torch.rand(4, device="npu").cpu(), after_cpu)


@pytest.mark.parametrize("case", ALLOWED, ids=lambda f: f.__name__)
def test_allowed_aliasing_is_captured_and_replayed_as_cpu_computes(case):
    assert torch.equal(captured(case).cpu(), case("cpu"))


def test_out_resized_over_the_storage_of_its_input_in_capture():
    def run(dev):
        buf = torch.arange(8.0, device=dev)
        out = buf[8:]
        torch.add(buf[:3], 10, out=out)
        return torch.cat([buf, out])

    g = torch.npu.NPUGraph()
    with torch.npu.graph(g):
        result = run("npu")
    g.replay()
    assert torch.equal(result.cpu(), run("cpu"))


@pytest.mark.parametrize("self_shape", [(), (3,), (2, 3)], ids=["0-dim", "1-dim", "2-dim"])
def test_addr_in_place_refuses_a_self_it_would_broadcast_as_cpu(self_shape):
    # ATen's addr.out tells the in-place call from out= by comparing C++ references.
    def run(dev):
        x = torch.ones(self_shape, device=dev)
        x.addr_(torch.arange(2.0, device=dev), torch.arange(3.0, device=dev), beta=2)
        return x

    if self_shape == (2, 3):
        assert torch.equal(run("npu").cpu(), run("cpu"))
        return
    expected = raised(run, "cpu")
    got = raised(run, "npu")
    assert type(got) is type(expected) and str(got).splitlines()[0] == str(expected).splitlines()[0]
    assert "2D tensor expected" in str(got)


@pytest.mark.parametrize("call", [
    lambda x, out: torch.narrow_copy(x, 0, 1, 2, out=out),
    lambda x, out: torch.ops.aten.avg_pool3d.out(x.reshape(1, 1, 1, 4, 3), [1, 2, 1], [1, 2, 1], [0, 0, 0],
                                                 False, True, None, out=out.reshape(1, 1, 1, 2, 3)),
], ids=["narrow_copy", "avg_pool3d"])
def test_out_that_overlaps_itself_is_refused_where_cpus_kernel_writes_past_it(call):
    x = torch.arange(12.0).reshape(4, 3).npu()
    out = torch.zeros(1, 3, device="npu").expand(2, 3)  # 2 x 3 elements over 3 floats
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        call(x, out)
    assert torch.equal(out.cpu(), torch.zeros(2, 3))
    fresh = torch.empty(2, 3, device="npu")
    call(x, fresh)  # a plain out= computes as on cpu
    assert torch.equal(fresh.cpu(), call(x.cpu(), torch.empty(2, 3)).reshape(2, 3))
