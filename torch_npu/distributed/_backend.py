"""Builds hccl process groups: timeouts, the collective board, the Gloo transport.

torch.distributed calls ``create_from_c10d`` (registered in torch_npu/_startup/hccl_registration.py)
for every group whose npu backend is hccl; ``ProcessGroupHCCL(store, rank, size, timeout)``
is the documented direct constructor and ends up in ``_build_process_group`` too.

Timeouts follow the Ascend documentation: ``HCCL_CONNECT_TIMEOUT`` (seconds, default 120)
bounds setting up the links, ``HCCL_EXEC_TIMEOUT`` (seconds, default 1800) bounds how long
a rank waits for its peers in a collective; an explicit ``init_process_group(timeout=...)``
wins over both. The real device clamps them to [120, 7200] and [68, 17340]; the simulator
takes any positive number so that short timeouts can be exercised.
"""
from __future__ import annotations

import os
import secrets
import socket
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.distributed import PrefixStore

import torch_npu._C as _C
from torch_npu import _env_settings, _public_env

DEFAULT_CONNECT_TIMEOUT_S = 120
DEFAULT_EXEC_TIMEOUT_S = 1800

_hccl = None


def hccl_module():
    """torch_npu._C._hccl, the bindings of the backend (created on first use)."""
    global _hccl
    if _hccl is None:
        _hccl = _C._init_hccl()
    return _hccl


def is_hccl_available() -> bool:
    """True when hccl process groups can be created (torch.distributed with Gloo inside)."""
    return dist.is_available() and dist.is_gloo_available()


def _env_seconds(name: str, default: float) -> float:
    # Any positive number, so that short timeouts can be exercised; the card's own
    # upper bound (Atlas A2: 2147483647 s) is the limit.
    return _env_settings.read_seconds(
        name, default, accepted=f"a positive number of seconds up to 2147483647, e.g. {name}=600"
    )


def resolve_timeouts(timeout: timedelta | None) -> tuple[timedelta, timedelta]:
    """(connect, exec) timeouts: an explicit timeout wins over HCCL_CONNECT/EXEC_TIMEOUT."""
    explicit = timeout is not None and timeout != dist.constants.default_pg_timeout
    connect = timedelta(seconds=_env_seconds("HCCL_CONNECT_TIMEOUT", DEFAULT_CONNECT_TIMEOUT_S))
    execute = timedelta(seconds=_env_seconds("HCCL_EXEC_TIMEOUT", DEFAULT_EXEC_TIMEOUT_S))
    if explicit:
        return timeout, timeout
    return connect, execute


def _dump_after_s() -> float:
    return _env_settings.read_seconds(
        "TORCH_HCCL_DUMP_AFTER_SEC", 0.0, allow_zero=True,
        accepted="a number of seconds from 0 (no dump, the default) to 2147483647",
    )


def shared_board_requested() -> bool:
    """``TORCH_HCCL_SHARED_BOARD``: whether ranks on one host share one collective board."""
    return _env_settings.read_switch(
        "TORCH_HCCL_SHARED_BOARD", True,
        accepted="1 (ranks on one host share a collective board, the default) or 0 (each rank keeps its own)",
    )


def _host_identity() -> str:
    """What two processes must share to use one shared-memory board."""
    parts = [socket.gethostname()]
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            parts.append(f.read().strip())
    except OSError:
        parts.append("?")
    for ns in ("ipc", "pid"):
        try:
            parts.append(str(os.stat(f"/proc/self/ns/{ns}").st_ino))
        except OSError:
            parts.append("?")
    return "|".join(parts)


def _wait_keys(store, keys: list[str], timeout: timedelta, what: str) -> None:
    try:
        store.wait(keys, timeout)
    except Exception as exc:  # a DistStoreError naming the keys is not helpful to users
        raise dist.DistBackendError(
            f"hccl: timed out after {timeout.total_seconds():.0f} s waiting for {what}. Every rank of the group must "
            "create it; the wait is bounded by init_process_group(timeout=...) or HCCL_CONNECT_TIMEOUT"
        ) from exc


def _incarnation(store, size: int) -> int:
    """Distinguishes re-creations of a group with the same name on a store that outlives it
    (destroy_process_group then init_process_group under torchrun)."""
    return (store.add("hccl_joins", 1) - 1) // size


def _check_board_setting_agrees(store, rank: int, size: int, connect: timedelta) -> bool:
    """Whether this rank asks for a shared board; raises at once when the ranks disagree (a
    rank that checks over the network and one that waits for the shared board would each wait
    out the connect timeout for the other)."""
    raw = os.environ.get("TORCH_HCCL_SHARED_BOARD", "1")
    wanted = shared_board_requested()  # validates the value before any rank waits
    store.set(f"shared_board/{rank}", f"{int(wanted)}{raw}")
    keys = [f"shared_board/{r}" for r in range(size)]
    _wait_keys(store, keys, connect, "every rank to join the group")
    settings = [store.get(k).decode() for k in keys]
    if any(v[0] != settings[rank][0] for v in settings):
        # Every rank reads every setting before any raises: rank 0 may host the store.
        store.set(f"shared_board_read/{rank}", "1")
        _wait_keys(store, [f"shared_board_read/{r}" for r in range(size)], connect, "every rank to compare settings")
        listed = ", ".join(f"rank {r}: {v[1:]!r}" for r, v in enumerate(settings))
        raise dist.DistBackendError(
            f"hccl: the ranks disagree on TORCH_HCCL_SHARED_BOARD ({listed}; unset means '1'). Set it to the same "
            "value on every node: 0 makes every rank check collectives over the network, as ranks on several "
            "hosts must; 1 (the default) uses shared memory among ranks of one host"
        )
    return wanted


def _make_board(store, rank: int, size: int, group: str, connect: timedelta):
    hccl = hccl_module()
    shared = size > 1 and _check_board_setting_agrees(store, rank, size, connect)
    if shared:
        store.set(f"host/{rank}", _host_identity())
        keys = [f"host/{r}" for r in range(size)]
        _wait_keys(store, keys, connect, "every rank to join the group")
        shared = all(store.get(k).decode() == store.get(keys[rank]).decode() for k in keys)
    if not shared:
        return hccl.Board.create_private(size, rank, group)
    if rank == 0:
        name = f"/torch_npu_hccl_{os.getpid()}_{secrets.token_hex(6)}"
        board = hccl.Board.create_shared(name, size, rank, group)
        store.set("board", name)
        _wait_keys(store, [f"attached/{r}" for r in range(1, size)], connect, "every rank to attach the collective board")
        board.unlink_name()
        return board
    _wait_keys(store, ["board"], connect, "rank 0 to create the collective board")
    board = hccl.Board.attach_shared(store.get("board").decode(), size, rank)
    store.set(f"attached/{rank}", "1")
    return board


def _build_process_group(store, rank: int, size: int, timeout, group_name: str = "", global_ranks=()):
    if isinstance(timeout, (int, float)):
        timeout = timedelta(seconds=timeout)
    connect, execute = resolve_timeouts(timeout)
    # Validated before any rank waits; docs/runtime.md says what each does here.
    _public_env.hccl_async_error_handling()
    _public_env.hccl_desync_debug()
    _public_env.hccl_zero_copy()
    if not 0 <= rank < size:
        raise ValueError(f"hccl: rank {rank} is not in a group of size {size}")
    incarnation = _incarnation(PrefixStore("hccl/", store), size)
    own_store = PrefixStore(f"hccl/{incarnation}/", store)
    board = _make_board(own_store, rank, size, group_name, connect)
    transport = dist.ProcessGroupGloo(PrefixStore(f"hccl_gloo/{incarnation}/", store), rank, size, connect)
    hccl = hccl_module()
    return hccl.ProcessGroupHCCL(
        transport, board, rank, size, execute, group_name, [int(r) for r in global_ranks], _dump_after_s()
    )


def create_from_c10d(dist_backend_opts, backend_options):
    """torch.distributed's creator for an hccl group (``Backend.register_backend(extended_api=True)``)."""
    return _build_process_group(
        dist_backend_opts.store,
        dist_backend_opts.group_rank,
        dist_backend_opts.group_size,
        dist_backend_opts.timeout,
        str(dist_backend_opts.group_id),
        list(dist_backend_opts.global_ranks_in_group),
    )


def hccl_backend_of(group=None):
    """The ProcessGroupHCCL of ``group`` (default: the default group)."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    try:
        backend = pg._get_backend(torch.device("npu"))
    except RuntimeError as exc:
        raise ValueError(f"process group {pg.group_name!r} has no hccl backend for npu tensors") from exc
    if not isinstance(backend, hccl_module().ProcessGroupHCCL):
        raise ValueError(f"process group {pg.group_name!r} uses {backend.name()!r} for npu tensors, not hccl")
    return backend
