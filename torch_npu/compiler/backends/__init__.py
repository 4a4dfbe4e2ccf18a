"""The npu Dynamo backends, one module each; ``registry`` holds their light entries."""
