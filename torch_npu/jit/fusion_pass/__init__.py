"""The built-in TorchScript fusion passes, one module per pattern."""
