"""A snapshot of what torch's modules and classes hold, to tell what a session changed.

The census tests take one before and one after an action (in a fresh interpreter) and
compare. A module entry is recorded by identity: its functions, classes, builtins, its
own class (``torch.cuda.__class__``) and its private binding objects (``torch.cuda.nvtx._nvtx``).
So is every entry of the ``__dict__`` of every torch class found in those modules, keyed by
the class object itself: ``SomeDynamoClass.method = wrapper`` or an added property shows up
as a change of ``<class module>.<class qualname>.<member>`` even though no module entry moved.

Classes that did not exist in the first snapshot are not followed (torch creates classes
as it imports more of itself; the module entry that binds one is enough). Only classes
whose ``__module__`` is torch's are followed: the census is about torch.

Run inside the child: ``sys.path.insert(0, <test dir>); from module_census import ...``.
"""
from __future__ import annotations

import inspect
import sys
import types
import warnings

_PLAIN = (types.ModuleType, int, float, str, bytes, bool, type(None), list, dict, set, tuple, frozenset)


def _followed(name: str) -> bool:
    return name.startswith("torch") and not name.startswith(("torch_npu", "torch.npu"))


def _torch_class(value) -> bool:
    module = getattr(value, "__module__", None)
    return isinstance(module, str) and (module == "torch" or module.startswith("torch.")) and _followed(module)


def snapshot() -> dict:
    """``{"modules": {name: {key: value}}, "classes": {id: (label, cls, {attr: member})}}``."""
    # Looking at deprecated objects (torch.distributed.reduce_op) warns; looking is not using.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _snapshot()


def _snapshot() -> dict:
    modules: dict[str, dict] = {}
    classes: dict[int, tuple] = {}
    for name in sorted(name for name in list(sys.modules) if _followed(name)):
        module = sys.modules.get(name)
        if not isinstance(module, types.ModuleType):
            continue
        entries = {"__class__": type(module)}
        for key, value in list(vars(module).items()):
            if inspect.isfunction(value) or inspect.isbuiltin(value) or inspect.isclass(value):
                entries[key] = value
            elif key.startswith("_") and not isinstance(value, _PLAIN):
                entries[key] = value
            if inspect.isclass(value) and id(value) not in classes and _torch_class(value):
                label = f"{value.__module__}.{value.__qualname__}"
                classes[id(value)] = (label, value, dict(vars(value)))
        modules[name] = entries
    return {"modules": modules, "classes": classes}


def differences(before: dict, after: dict) -> list[tuple[str, str, str]]:
    """Sorted ``(change, scope, dotted name)``: change is ``changed``/``added``/``removed``,
    scope ``module`` (an entry of a module) or ``class`` (a member of a class)."""
    out = set()
    for name, entries in before["modules"].items():
        now = after["modules"].get(name, {})
        out |= {("changed", "module", f"{name}.{k}") for k, v in entries.items() if k in now and now[k] is not v}
        out |= {("removed", "module", f"{name}.{k}") for k in entries if k not in now and name in after["modules"]}
        out |= {("added", "module", f"{name}.{k}") for k in now if k not in entries}
    for label, cls, members in before["classes"].values():
        now = vars(cls)
        out |= {("changed", "class", f"{label}.{k}") for k, v in members.items() if k in now and now[k] is not v}
        out |= {("removed", "class", f"{label}.{k}") for k in members if k not in now}
        out |= {("added", "class", f"{label}.{k}") for k in now if k not in members}
    return sorted(out)


def import_line(test_dir: str) -> str:
    """The lines a census child runs to import this module from ``test_dir``."""
    return f"import sys\nsys.path.insert(0, {test_dir!r})\nfrom module_census import snapshot, differences\ndel sys.path[0]\n"
