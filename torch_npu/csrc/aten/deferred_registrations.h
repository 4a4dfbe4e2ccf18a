// The dispatcher registrations that touch every operator, made when the process first
// needs them instead of when the runtime library loads.
//
// A backend fallback recomputes one dispatch-table entry of each of the ~3,700 operators,
// and routing the composites with CPU kernels to the fallback asks every operator for its
// kernels: together about a third of the instructions of `import torch_npu`. None of it
// is reached before a real npu tensor exists (FakeTensorMode's npu tensors stop at the
// Python key, above the backend keys), and every npu tensor's memory comes from the
// device, so the device's initialisation (runtime/device.cpp `lazy_init`, which torch
// calls before a Python factory makes the first npu tensor) makes them. Autocast is also
// reached by FakeTensorMode's npu tensors (AutocastPrivateUse1 sits above the Python key),
// so its registrations are also made by the first `torch.autocast("npu")` (through
// `torch.npu.get_amp_supported_dtype`) and by `torch.npu.set_autocast_enabled`. Each
// function registers once (thread-safe) and keeps its libraries for the life of the
// process. docs/runtime.md lists the triggers and the one path they miss.
#pragma once

namespace torch_npu {

// The npu fallback for PrivateUse1 and the aten operators routed to it (kernels.cpp).
void register_dense_fallback();

// The sparse COO fallback and its routed operators, and the refusal of the compressed
// sparse layouts (sparse.cpp).
void register_sparse_fallbacks();

// The AutocastPrivateUse1 fallthrough and CUDA's autocast policies for npu (autocast.cpp).
void register_autocast_kernels();

}  // namespace torch_npu
