"""Runs the OpInfo conformance sweep of the npu device over all of PyTorch's ``op_db``.

The harness is ``test/runtime/opinfo_harness.py`` (the test suite runs a fixed sample of
it); this entry point exists so the full sweep is run from ``bench/`` like the other
measurements. Arguments are the harness's:

    python bench/opinfo_sweep.py [--ops NAME,...] [--timeout S] [--json FILE] [--list-disagreements]
                                 [--shard K/N] [--jsonl FILE] [--summarise FILE...]
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "test", "runtime"))

from opinfo_harness import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
