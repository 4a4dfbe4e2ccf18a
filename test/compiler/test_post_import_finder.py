"""The trigger's post-import finder, on stand-in modules: fires after the module's code,
delegates to other finders, leaves the module untouched, and leaves ``sys.meta_path``."""
from __future__ import annotations


FINDER_SNIPPET = """
import importlib.abc, importlib.util, sys, types
import torch_npu._startup.compile_trigger as trigger

calls = []
steps = types.ModuleType("stand_in_steps")
steps.after_colorsys = lambda: calls.append(("after_colorsys", hasattr(sys.modules["colorsys"], "rgb_to_hsv")))
steps.after_virtual = lambda: calls.append(("after_virtual", sys.modules["virtual_mod"].VALUE))
sys.modules["stand_in_steps"] = steps


class VirtualFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    # A custom importer placed after the trigger's finder: it must still be the one that loads.
    def find_spec(self, name, path, target=None):
        if name == "virtual_mod":
            return importlib.util.spec_from_loader(name, self)
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        module.VALUE = 42


trigger._watching.clear()
trigger._remove_finder()
trigger._STEPS_MODULE = "stand_in_steps"
trigger.STEPS = {"colorsys": ("after_colorsys",), "virtual_mod": ("after_virtual",)}
assert "colorsys" not in sys.modules
trigger.install()
sys.meta_path.append(VirtualFinder())
print("installed", trigger.state().finder_installed, sys.meta_path.index(trigger._finder))
import colorsys
print("colorsys", calls, type(colorsys.__loader__).__name__, colorsys.__spec__.loader is colorsys.__loader__)
print("still", trigger.state().finder_installed, trigger.state().watching)
import virtual_mod
print("virtual", calls[-1], type(virtual_mod.__loader__).__name__)
print("after", trigger.state().finder_installed, trigger.state().done)
"""


def test_finder_fires_after_module_code_delegates_and_goes_away(python):
    out = python(FINDER_SNIPPET).splitlines()
    assert out[0] == "installed True 0"
    assert out[1] == "colorsys [('after_colorsys', True)] SourceFileLoader True"
    assert out[2] == "still True ('virtual_mod',)"
    assert out[3] == "virtual ('after_virtual', 42) VirtualFinder"
    assert out[4] == "after False ('after_colorsys', 'after_virtual')"


def test_failing_step_warns_keeps_import_and_is_retried_by_ensure_setup(python):
    out = python(
        """
        import sys, types, warnings
        import torch_npu._startup.compile_trigger as trigger

        attempts = []
        def flaky():
            attempts.append(1)
            if len(attempts) == 1:
                raise RuntimeError("not yet")
        steps = types.ModuleType("stand_in_steps")
        steps.flaky = flaky
        sys.modules["stand_in_steps"] = steps
        trigger._watching.clear()
        trigger._remove_finder()
        trigger._STEPS_MODULE = "stand_in_steps"
        trigger.STEPS = {"colorsys": ("flaky",)}
        trigger.install()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import colorsys
        print(colorsys.rgb_to_hsv(1, 0, 0), [str(w.message).split(" (")[0] for w in caught])
        print(trigger.state().failed)
        trigger.ensure_setup()
        print(trigger.state().done, trigger.state().failed, len(attempts))
        """
    ).splitlines()
    assert out[0] == "(0.0, 1.0, 1) ['torch_npu compiler setup failed after importing colorsys']"
    assert out[1] == "(('flaky', 'RuntimeError: not yet'),)"
    assert out[2] == "('flaky',) () 2"
