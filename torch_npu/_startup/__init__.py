"""What ``import torch_npu`` sets up beyond the runtime, one module per concern.

Each module here registers something with PyTorch or the import system, cheaply and
without touching the device; ``torch_npu/__init__.py`` calls them in order:

- ``log_names``: torch_npu's ``TORCH_LOGS`` names (also called from the autoload entry);
- ``autograd_exit_barrier``: lets autograd's npu device threads finish before exit;
- ``compile_trigger``: the one post-import trigger that runs ``setup_steps`` when Dynamo
  or Inductor is first imported (the compile path: trigger, then setup steps, then the
  registries of ``torch_npu._patches`` and ``torch_npu.compiler``, then the backends);
- ``npugraph_ex_finder``: the ``npugraph_ex`` top-level name of the bundled package;
- ``hccl_registration``: the ``hccl`` process-group backend's name in torch.distributed;
- ``import_delegation``: how the two finders ask the other finders for a module.

This package sits above ``torch_npu._patches`` and ``torch_npu.compiler``: it imports them
(lazily, in the setup steps) and they do not import it, with one exception said where it
stands (``torch_npu.compiler.backends.registry`` asks the trigger to finish the setup when
a backend is looked up directly).
"""
