"""Makes the bundled ``npugraph_ex`` package importable under its own top-level name.

``npugraph_ex`` is written as a standalone distribution (its modules import each other as
``from npugraph_ex.x import y``) and its files are shipped at ``torch_npu/dynamo/npugraph_ex``,
where external build pipelines copy the standalone package. Its canonical module name is
therefore ``npugraph_ex``; ``torch_npu.dynamo.npugraph_ex`` must name the very same module
objects, never a second copy and never a proxy object.

One permanent meta path finder does both, with the import system's own machinery:

- ``npugraph_ex``: the other finders are asked first, so an independently installed
  distribution wins; only if none has it does the finder return a spec for the bundled
  directory. From there on it is an ordinary package: real ``__spec__`` and ``__path__``,
  submodules found by the path finder through ``__path__`` and bound as attributes by the
  import system, reload and pickling by name work.
- ``torch_npu.dynamo.npugraph_ex[.sub]``: an alias spec whose loader imports the canonical
  module and hands that very object back, so both names map to one module in ``sys.modules``.

Nothing is imported until asked. For every other import the finder costs one string test.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from torch_npu._startup.import_delegation import find_spec_elsewhere

CANONICAL = "npugraph_ex"
ALIAS = "torch_npu.dynamo.npugraph_ex"
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # torch_npu/
_BUNDLED_DIR = os.path.join(_PACKAGE_DIR, "dynamo", CANONICAL)


class _AliasLoader:
    """Loads ``torch_npu.dynamo.npugraph_ex[.sub]`` as the canonical ``npugraph_ex[.sub]``."""

    def __init__(self, canonical_name: str) -> None:
        self._canonical_name = canonical_name

    def create_module(self, spec):  # noqa: ANN001 - importlib protocol
        module = importlib.import_module(self._canonical_name)
        self._canonical_spec = module.__spec__
        return module

    def exec_module(self, module) -> None:  # noqa: ANN001 - importlib protocol
        # module_from_spec() has just overwritten __spec__ with the alias spec (it leaves
        # the other attributes alone when they are set); put the canonical one back so
        # reload, pickling and introspection keep seeing the module under its real name.
        module.__spec__ = self._canonical_spec


class _NpugraphExFinder:
    """Meta path finder for the two names above; see the module docstring."""

    def find_spec(self, fullname, path, target=None):  # noqa: ANN001 - importlib protocol
        if not fullname.startswith(("npugraph_ex", "torch_npu.dynamo.npugraph_ex")):
            return None
        if fullname == CANONICAL:
            return self._find_canonical(path, target)
        if fullname == ALIAS or fullname.startswith(ALIAS + "."):
            canonical_name = CANONICAL + fullname[len(ALIAS):]
            return importlib.util.spec_from_loader(
                fullname, _AliasLoader(canonical_name), is_package=fullname == ALIAS
            )
        return None  # npugraph_ex.<sub>: the path finder resolves it through __path__

    def _find_canonical(self, path, target):  # noqa: ANN001
        spec = find_spec_elsewhere(self, CANONICAL, path, target)
        if spec is not None:
            return spec
        init = os.path.join(_BUNDLED_DIR, "__init__.py")
        if not os.path.isfile(init):
            return None
        return importlib.util.spec_from_file_location(
            CANONICAL, init, submodule_search_locations=[_BUNDLED_DIR]
        )

    def invalidate_caches(self) -> None:
        pass


_finder = _NpugraphExFinder()


def install() -> None:
    """Put the finder at the front of ``sys.meta_path``; idempotent."""
    if not any(isinstance(finder, _NpugraphExFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _finder)
