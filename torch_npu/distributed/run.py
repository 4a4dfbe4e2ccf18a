"""torch_npu.distributed.run: the torchrun launcher as Ascend names it.

``python -m torch_npu.distributed.run`` takes torchrun's arguments and launches the same
way; ``parse_args`` is torchrun's parser.
"""
from __future__ import annotations

__all__ = ["parse_args", "main"]


def parse_args(args):
    """torchrun's argument parser applied to ``args`` (a list of strings)."""
    from torch.distributed.run import parse_args as torchrun_parse_args

    return torchrun_parse_args(args)


def main(args=None):
    from torch.distributed.run import run

    run(parse_args(args))


if __name__ == "__main__":
    main()
