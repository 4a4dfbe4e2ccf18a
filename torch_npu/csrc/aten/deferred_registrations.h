// The dispatcher registrations that touch every operator, made when the process first
// needs them instead of when the runtime library loads.
//
// A backend fallback recomputes one dispatch-table entry of each of the ~3,700 operators,
// and routing the composites with CPU kernels to the fallback asks every operator for its
// kernels: together about a third of the instructions of `import torch_npu`. None of it
// is reached before a real npu tensor exists (FakeTensorMode's npu tensors stop at the
// Python key, above the backend keys), and every npu tensor's memory comes from the
// device, so the device's initialisation (runtime/device.cpp `lazy_init`, which torch
// calls before a Python factory makes the first npu tensor) makes them. Each function
// registers once (thread-safe) and keeps its libraries for the life of the process.
// Autocast's fallthrough and policies stay at load (autocast.cpp): AutocastPrivateUse1
// sits above the Python key, so FakeTensorMode's npu tensors reach it with no device.
#pragma once

namespace torch_npu {

// The npu fallback for PrivateUse1 and the aten operators routed to it (kernels.cpp).
void register_dense_fallback();

// The sparse COO fallback and its routed operators, and the refusal of the compressed
// sparse layouts (sparse.cpp).
void register_sparse_fallbacks();

}  // namespace torch_npu
