"""torch_npu's compiler integration: Dynamo setup steps, device interface, backends.

Nothing here is imported by ``import torch_npu``: the compile trigger
(``torch_npu._compile_trigger``) imports ``setup_steps`` after Dynamo has been imported,
and Dynamo imports ``backends.registry`` through the ``torch_dynamo_backends`` entry
points. Importing this package itself imports nothing else, so those light entry modules
stay light.
"""
