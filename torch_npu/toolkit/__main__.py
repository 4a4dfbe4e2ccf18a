"""``python -m torch_npu.toolkit home|env [DIR]``: write the simulated CANN home, or print
the ``export`` lines that set the environment as CANN's ``set_env.sh`` does::

    eval "$(python -m torch_npu.toolkit env)"
"""
from __future__ import annotations

import argparse
import sys

from torch_npu.toolkit.home import default_base, ensure_home, export_lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torch_npu.toolkit", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, help_text in (("home", "create the toolkit home and print its path (ASCEND_HOME_PATH)"),
                            ("env", "create the toolkit home and print the export lines for eval")):
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("dir", nargs="?", default=None,
                         help=f"where the Ascend tree goes (default: {default_base()})")
    args = parser.parse_args(argv)
    try:
        home = ensure_home(args.dir)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.command == "home":
        print(home)
    else:
        print("\n".join(export_lines(home)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
