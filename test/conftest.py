"""Session-wide test settings: one Inductor cache directory for the whole run.

Inductor compiles C++ with g++; sharing one cache across every test (and the
subprocesses they start, which inherit the environment) keeps compiles few.
"""
import os
import tempfile

if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="torch_npu_inductor_cache_")
