// Operator kernels of the simulated NPU.
//
// View and metadata ops are native: they build new tensors over the same npu storage.
// Every other op reaches one boxed fallback that lends the npu tensors' bytes to the CPU
// kernel as CPU tensors (no copy), lets the CPU kernel allocate its outputs straight in
// device memory, and hands the outputs back as npu tensors. Eager npu results are
// therefore exactly the CPU results.
#include "torch_npu/csrc/aten/cuda_dtype_widening.h"
#include "torch_npu/csrc/aten/deferred_registrations.h"
#include "torch_npu/csrc/aten/fallback.h"
#include "torch_npu/csrc/aten/fast_path.h"
#include "torch_npu/csrc/aten/random_draws.h"
#include "torch_npu/csrc/observe/npu_observe.h"
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/allocator.h"
#include "torch_npu/csrc/runtime/stream.h"
#include "torch_npu/csrc/runtime/generator.h"
#include "torch_npu/csrc/graphs/capture.h"
#include "torch_npu/csrc/aten/cpu_aliases.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/SparseTensorImpl.h>

#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include <algorithm>
#include <mutex>

namespace torch_npu {

at::Tensor npu_tensor_over(const c10::Storage& storage, const at::Tensor& geometry) {
  auto t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage),
                                                     c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                     geometry.dtype());
  t.unsafeGetTensorImpl()->set_sizes_and_strides(geometry.sizes(), geometry.strides(),
                                                 geometry.storage_offset());
  if (geometry.is_conj()) t.unsafeGetTensorImpl()->_set_conj(true);
  if (geometry.is_neg()) t.unsafeGetTensorImpl()->_set_neg(true);
  return t;
}

namespace {

c10::Storage adopt_storage(c10::StorageImpl* cpu_storage, c10::DeviceIndex device) {
  size_t nbytes = cpu_storage->nbytes();
  const c10::DataPtr& dp = cpu_storage->data_ptr();
  if (is_device_memory_deleter(dp.get_deleter())) {
    c10::DataPtr taken = cpu_storage->set_data_ptr(c10::DataPtr(nullptr, c10::Device(c10::kCPU)));
    taken.unsafe_set_device(c10::Device(kNpu, device));
    return c10::Storage(c10::Storage::use_byte_size_t(), nbytes, std::move(taken), npu_allocator(), true);
  }
  // Memory the CPU kernel did not take from the device (rare: e.g. a cached constant).
  c10::DataPtr fresh = allocate_device_memory(nbytes, device, c10::Device(kNpu, device));
  if (nbytes > 0) std::memcpy(fresh.get(), dp.get(), nbytes);
  return c10::Storage(c10::Storage::use_byte_size_t(), nbytes, std::move(fresh), npu_allocator(), true);
}

}  // namespace

at::Tensor adopt_cpu_result(const at::Tensor& cpu, c10::DeviceIndex device) {
  return npu_tensor_over(adopt_storage(cpu.storage().unsafeGetStorageImpl(), device), cpu);
}

namespace {

bool is_generator_type(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  if (auto opt = type->cast<c10::OptionalType>()) return opt->getElementType()->kind() == c10::TypeKind::GeneratorType;
  return false;
}

// The npu storages that took over the memory of the CPU kernel's outputs, by CPU storage
// (outputs that are views of one CPU storage become views of one npu storage).
using AdoptedStorages = c10::SmallVector<std::pair<c10::StorageImpl*, c10::Storage>, 2>;

struct FallbackCall {
  const c10::OperatorHandle& op;
  // npu tensors (strided) and the CPU aliases handed to the kernel, one entry per npu
  // tensor; views of one npu storage share one CPU storage, so the CPU kernel's overlap
  // checks apply.
  // (Inline room for a few tensors: an ordinary call makes no heap allocation here.)
  CpuAliasSet aliases;
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 4> npu_to_cpu;
  // npu sparse tensors and the SparseCPU tensors over the aliases of their parts.
  std::vector<std::pair<at::Tensor, at::Tensor>> sparse_to_cpu;
  // cpu tensors and tensors of another npu device, with their argument index: checked
  // against CUDA's rule once the operator's device is known.
  c10::SmallVector<std::pair<size_t, at::Tensor>, 2> foreign;
  c10::DeviceIndex device = -1;
  size_t arg_index = 0;

  at::Tensor to_cpu(const at::Tensor& t) {
    if (!t.defined()) return t;
    if (t.device().type() != kNpu) {
      foreign.emplace_back(arg_index, t);
      return t;
    }
    c10::DeviceIndex d = t.device().index();
    if (device < 0) {
      device = d;
    } else if (d != device) {
      foreign.emplace_back(arg_index, t);
    }
    return alias(t);
  }

  at::Tensor alias(const at::Tensor& t) {
    if (t.layout() == at::kSparse) {
      auto* impl = static_cast<at::SparseTensorImpl*>(t.unsafeGetTensorImpl());
      at::Tensor cpu = make_sparse_over(c10::DispatchKey::SparseCPU, t, alias(impl->indices()), alias(impl->values()));
      sparse_to_cpu.emplace_back(t, cpu);
      return cpu;
    }
    TORCH_CHECK(t.layout() == at::kStrided, op.schema().name(), ": npu tensors of layout ", t.layout(),
                " are not supported (npu supports strided and sparse COO tensors)");
    if (t._is_zerotensor()) {
      // Zero tensors have no memory: the kernel reads real zeros.
      return at::zeros(t.sizes(), t.options().device(c10::kCPU));
    }
    const bool first_use = aliases.is_new(t);
    at::Tensor cpu = aliases.alias(t);
    if (first_use) npu_to_cpu.emplace_back(t, cpu);
    return cpu;
  }

  at::Tensor to_npu(const at::Tensor& cpu, AdoptedStorages& adopted) {
    if (!cpu.defined()) return cpu;
    for (const auto& m : npu_to_cpu) {
      if (m.second.unsafeGetTensorImpl() == cpu.unsafeGetTensorImpl()) return m.first;
    }
    if (cpu.layout() == at::kSparse) {
      for (const auto& m : sparse_to_cpu) {
        if (m.second.unsafeGetTensorImpl() == cpu.unsafeGetTensorImpl()) return m.first;
      }
      auto* impl = static_cast<at::SparseTensorImpl*>(cpu.unsafeGetTensorImpl());
      at::Tensor indices = to_npu(impl->indices(), adopted);
      at::Tensor values = to_npu(impl->values(), adopted);
      return make_sparse_over(c10::DispatchKey::SparsePrivateUse1, cpu, indices, values);
    }
    TORCH_CHECK_NOT_IMPLEMENTED(cpu.layout() == at::kStrided, op.schema().name(), " makes a tensor of layout ",
                                cpu.layout(), ": npu supports strided and sparse COO tensors; the compressed sparse "
                                "layouts (CSR, CSC, BSR, BSC) and mkldnn tensors are not supported on npu. Keep "
                                "such tensors on cpu.");
    TORCH_CHECK_NOT_IMPLEMENTED(!cpu.is_quantized(), op.schema().name(), " makes a quantized tensor (",
                                cpu.scalar_type(), "): quantized tensors are not supported on npu; keep them on cpu.");
    if (cpu._is_zerotensor()) return make_npu_zero_tensor(cpu.sizes(), cpu.scalar_type(), device);
    c10::StorageImpl* s = cpu.storage().unsafeGetStorageImpl();
    for (const auto& m : npu_to_cpu) {
      if (m.second.storage().unsafeGetStorageImpl() == s) return npu_tensor_over(m.first.storage(), cpu);
    }
    TORCH_CHECK(s->data_ptr().get() != nullptr || s->nbytes() == 0, op.schema().name(),
                " returned a cpu tensor without memory, which cannot become an npu tensor");
    for (const auto& a : adopted) {
      if (a.first == s) return npu_tensor_over(a.second, cpu);
    }
    adopted.emplace_back(s, adopt_storage(s, device));
    return npu_tensor_over(adopted.back().second, cpu);
  }
};

}  // namespace

// Propagates what an out= or in-place CPU kernel did to the storage and geometry of
// an argument (a resize reallocates through the redirecting allocator). Several
// arguments may share one storage: `updated` holds the npu storages already given
// their new memory (the first adoption takes the memory out of the CPU storage).
void propagate_resize(const at::Tensor& npu, const at::Tensor& cpu, c10::DeviceIndex device,
                      std::vector<c10::StorageImpl*>& updated) {
  c10::StorageImpl* cpu_storage = cpu.storage().unsafeGetStorageImpl();
  c10::StorageImpl* npu_storage = npu.storage().unsafeGetStorageImpl();
  const bool done = std::find(updated.begin(), updated.end(), npu_storage) != updated.end();
  if (!done && (cpu_storage->data_ptr().get() != npu_storage->data_ptr().get() ||
                cpu_storage->nbytes() != npu_storage->nbytes())) {
    updated.push_back(npu_storage);
    c10::Storage fresh = adopt_storage(cpu_storage, device);
    npu_storage->set_data_ptr_noswap(std::move(fresh.unsafeGetStorageImpl()->mutable_data_ptr()));
    npu_storage->set_nbytes(fresh.nbytes());
  }
  if (cpu.sizes() != npu.sizes() || cpu.strides() != npu.strides() ||
      cpu.storage_offset() != npu.storage_offset()) {
    npu.unsafeGetTensorImpl()->set_sizes_and_strides(cpu.sizes(), cpu.strides(), cpu.storage_offset());
  }
}

namespace {

[[noreturn]] void report_missing_cpu_kernel(const c10::OperatorHandle& op) {
  const bool cuda_only = op.hasKernelForDispatchKey(c10::DispatchKey::CUDA);
  TORCH_CHECK_NOT_IMPLEMENTED(false, op.schema().name(), " is not supported on npu: the simulated npu runs each "
                              "operator with its CPU kernel, and PyTorch has no CPU kernel for this one",
                              cuda_only ? " (it exists only for CUDA)" : "",
                              ". Run it on cpu tensors, or use an operator with a CPU kernel.");
}

}  // namespace

void npu_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  if (C10_UNLIKELY(in_bad_fork())) check_not_in_bad_fork();
  const auto& schema = op.schema();
  const auto& args = schema.arguments();
  const size_t num_args = args.size();
  const size_t begin = stack->size() - num_args;
  FallbackCall call{op};
  observe::KernelLaunch launch(observe::WorkKind::Kernel, schema.name());
  if (launch.active() && observe::watching(observe::kSanitizer)) {
    launch.accesses() = observe::operator_accesses(schema, &(*stack)[begin], num_args);
  }

  for (size_t i = 0; i < num_args; ++i) {
    c10::IValue& iv = (*stack)[begin + i];
    call.arg_index = i;
    if (iv.isTensor()) {
      iv = call.to_cpu(iv.toTensor());
    } else if (iv.isTensorList()) {
      auto list = iv.toTensorList();
      c10::List<at::Tensor> converted;
      converted.reserve(list.size());
      for (const at::Tensor& t : list) converted.push_back(call.to_cpu(t));
      iv = converted;
    } else if (iv.isOptionalTensorList()) {
      auto list = iv.toOptionalTensorList();
      c10::List<std::optional<at::Tensor>> converted;
      converted.reserve(list.size());
      for (const std::optional<at::Tensor>& t : list) {
        converted.push_back(t.has_value() ? std::optional<at::Tensor>(call.to_cpu(*t)) : std::nullopt);
      }
      iv = converted;
    } else if (iv.isDevice() && iv.toDevice().type() == kNpu) {
      c10::Device d = iv.toDevice();
      c10::DeviceIndex idx = d.has_index() ? d.index() : current_device();
      check_device_index(idx, schema.name().c_str());
      if (call.device < 0) call.device = idx;
      iv = c10::IValue(c10::Device(c10::kCPU));
    }
  }
  if (call.device < 0) call.device = current_device();
  for (const auto& [index, tensor] : call.foreign) check_foreign_argument(op, index, tensor, call.device);
  GeneratorArguments generators;
  for (size_t i = 0; i < num_args; ++i) {
    if (!is_generator_type(args[i].type())) continue;
    c10::IValue& iv = (*stack)[begin + i];
    at::Generator gen = iv.isNone() ? default_generator(call.device) : iv.toGenerator();
    TORCH_CHECK(gen.device().type() == kNpu, "Expected an npu generator for ", schema.name(),
                " on npu tensors, got a generator of device ", gen.device(),
                "; create it with torch.Generator(device='npu')");
    iv = c10::IValue(engine_of(gen));  // loaded with the generator's stream when the kernel runs
    generators.emplace_back(i, std::move(gen));
  }
  TORCH_INTERNAL_ASSERT(generators.size() <= 1, schema.name(), " takes more than one generator");

  CurrentDeviceScope device_scope(call.device);
  if (active_capture() != nullptr &&
      record_operator(op, stack, {call.npu_to_cpu.begin(), call.npu_to_cpu.end()}, call.device, generators)) {
    return;
  }
  const bool sparse = !call.sparse_to_cpu.empty() || ks.has(c10::DispatchKey::SparsePrivateUse1);
  const c10::DispatchKeySet cpu_keys = sparse ? c10::DispatchKeySet({c10::DispatchKey::SparseCPU, c10::DispatchKey::CPU})
                                              : c10::DispatchKeySet(c10::DispatchKey::CPU);
  launch.start(current_stream(call.device));
  try {
    CpuAllocationRedirect redirect(call.device);
    if (generators.empty()) {
      redispatch_to_cpu_kernel(op, cpu_keys, stack);
    } else {
      const auto& [index, npu_gen] = generators.front();
      draw_from(npu_gen, max_values_drawn(op, &(*stack)[begin], num_args), [&](const at::Generator& engine) {
        (*stack)[begin + index] = c10::IValue(engine);
        redispatch_to_cpu_kernel(op, cpu_keys, stack);
      });
    }
  } catch (const c10::NotImplementedError&) {
    if (!op.hasKernelForDispatchKey(sparse ? c10::DispatchKey::SparseCPU : c10::DispatchKey::CPU)) {
      report_missing_cpu_kernel(op);
    }
    throw;
  }
  const size_t num_returns = schema.returns().size();
  const size_t ret_begin = stack->size() - num_returns;
  AdoptedStorages adopted;
  for (size_t i = 0; i < num_returns; ++i) {
    c10::IValue& iv = (*stack)[ret_begin + i];
    if (iv.isTensor()) {
      iv = call.to_npu(iv.toTensor(), adopted);
    } else if (iv.isTensorList()) {
      auto list = iv.toTensorList();
      c10::List<at::Tensor> converted;
      converted.reserve(list.size());
      for (const at::Tensor& t : list) converted.push_back(call.to_npu(t, adopted));
      iv = converted;
    }
  }
  if (launch.active()) {
    for (size_t i = 0; i < num_returns; ++i) {
      const c10::IValue& iv = (*stack)[ret_begin + i];
      if (iv.isTensor()) launch.add_output(iv.toTensor());
    }
  }
  for (size_t i = 0; i < num_args; ++i) {
    const auto* alias = args[i].alias_info();
    if (alias == nullptr || !alias->isWrite()) continue;
    std::vector<c10::StorageImpl*> updated;
    for (const auto& m : call.npu_to_cpu) propagate_resize(m.first, m.second, call.device, updated);
    for (const auto& m : call.sparse_to_cpu) {
      auto* cpu_impl = static_cast<at::SparseTensorImpl*>(m.second.unsafeGetTensorImpl());
      assign_sparse(m.first, m.second, call.to_npu(cpu_impl->indices(), adopted),
                    call.to_npu(cpu_impl->values(), adopted));
    }
    break;
  }
}

namespace {

// ---- native kernels ------------------------------------------------------------

// The device a new npu tensor goes to, after checking the options npu supports.
c10::DeviceIndex new_tensor_device(std::optional<at::Layout> layout, std::optional<at::Device> device,
                                   std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false), "Only dense CPU tensors can be pinned; npu tensors live on the device");
  TORCH_CHECK(layout.value_or(at::kStrided) == at::kStrided,
              "npu tensors support only the strided layout, got ", layout.value());
  c10::DeviceIndex idx = device.has_value() && device->has_index() ? device->index() : current_device();
  check_device_index(idx, "tensor creation");
  return idx;
}

at::Tensor npu_empty(c10::IntArrayRef size, std::optional<at::ScalarType> dtype, std::optional<at::Layout> layout,
                     std::optional<at::Device> device, std::optional<bool> pin_memory,
                     std::optional<at::MemoryFormat> memory_format) {
  if (C10_UNLIKELY(in_bad_fork())) check_not_in_bad_fork();
  CurrentDeviceScope scope(new_tensor_device(layout, device, pin_memory));
  return at::detail::empty_generic(size, npu_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                   c10::dtype_or_default(dtype), memory_format);
}

at::Tensor npu_empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                             std::optional<at::Layout> layout, std::optional<at::Device> device,
                             std::optional<bool> pin_memory) {
  if (C10_UNLIKELY(in_bad_fork())) check_not_in_bad_fork();
  return empty_strided_npu_tensor(size, stride, c10::dtype_or_default(dtype),
                                  new_tensor_device(layout, device, pin_memory));
}

at::Tensor as_cpu_view(const at::Tensor& t, CpuAliasSet& aliases) {
  return t.device().type() == kNpu ? aliases.alias(t) : t;
}

// The overlap rule of the CPU copy (`copy_` of a tensor onto itself, or onto the same
// elements of the same storage, is a no-op; otherwise its TensorIterator refuses a
// destination with internal overlap and a partial overlap of source and destination),
// applied to CPU aliases from one CpuAliasSet.
void check_copy_overlap(const at::Tensor& dst, const at::Tensor& src) {
  const bool same_data = dst.is_alias_of(src) && dst.storage_offset() == src.storage_offset() &&
                         dst.strides().equals(src.strides()) && dst.sizes().equals(src.sizes()) &&
                         dst.scalar_type() == src.scalar_type() && dst.is_conj() == src.is_conj() &&
                         dst.is_neg() == src.is_neg();
  if (dst.is_same(src) || same_data) return;
  at::assert_no_internal_overlap(dst);
  at::assert_no_partial_overlap(dst, src);
}

const std::string& copy_kind(const at::Tensor& src, const at::Tensor& dst) {
  static const std::string h2d = "Memcpy HtoD", d2h = "Memcpy DtoH", d2d = "Memcpy DtoD";
  if (src.device().type() != kNpu) return h2d;
  return dst.device().type() != kNpu ? d2h : d2d;
}

at::Tensor npu_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  if (C10_UNLIKELY(in_bad_fork())) check_not_in_bad_fork();
  const bool crosses_host = self.device().type() != kNpu || dst.device().type() != kNpu;
  if (crosses_host) check_not_capturing("a copy between npu and host memory (.cpu(), .to('cpu'), .npu())");
  // The copy runs on the current stream of the npu side (the destination's for npu -> npu).
  const c10::DeviceIndex device = dst.device().type() == kNpu ? dst.device().index() : self.device().index();
  if (is_recording()) {
    // npu -> npu copy inside a capture: record it, refusing now the overlap the CPU copy
    // would refuse at replay (as CUDA refuses it when the copy is issued).
    CpuAliasSet aliases;
    at::Tensor src_alias = aliases.alias(self);
    at::Tensor dst_alias = aliases.alias(dst);
    check_copy_overlap(dst_alias, src_alias);
    std::vector<observe::TensorAccess> accesses;
    observe::add_access(accesses, self, false, false, "self");
    observe::add_access(accesses, dst, true, false, "dst");
    record_host_call(observe::replayed_node(copy_kind(self, dst), device, std::move(accesses),
                                            [src_alias, dst_alias]() mutable { dst_alias.copy_(src_alias); }),
                     {self, dst});
    return dst;
  }
  observe::KernelLaunch launch(observe::WorkKind::Memcpy, copy_kind(self, dst));
  const c10::Stream stream = current_stream(device);
  // Between two devices the copy waits for the source device's stream, and that stream
  // waits for the copy, as on hardware.
  const bool across_devices = !crosses_host && self.device().index() != dst.device().index();
  if (launch.active()) {
    if (across_devices) observe::on_stream_wait(stream, current_stream(self.device().index()));
    observe::add_access(launch.accesses(), self, false, false, "self");
    observe::add_access(launch.accesses(), dst, true, false, "dst");
    launch.start(stream);
  }
  CpuAliasSet aliases;
  at::Tensor src_cpu = as_cpu_view(self, aliases);
  at::Tensor dst_cpu = as_cpu_view(dst, aliases);
  dst_cpu.copy_(src_cpu);
  if (launch.active() && across_devices) observe::on_stream_wait(current_stream(self.device().index()), stream);
  // A blocking copy to or from host memory waits for the stream, as on hardware.
  if (crosses_host && !non_blocking) observe::on_stream_synchronize(stream);
  copy_backend_meta_if_absent(self, dst);
  return dst;
}

at::Tensor npu_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) dst.resize_(self.sizes());
  return npu_copy_from(self, dst, false);
}

const at::Tensor& npu_resize_(const at::Tensor& self, c10::SymIntArrayRef size_sym,
                              std::optional<at::MemoryFormat> memory_format) {
  auto size = C10_AS_INTARRAYREF_SLOW(size_sym);
  auto* impl = self.unsafeGetTensorImpl();
  // As ATen's resize_: a tensor that already has the size keeps its strides (an expanded
  // out= tensor stays expanded, so the kernel's overlap check sees it); a new size is
  // laid out contiguously.
  if (self.sizes() != size) impl->set_sizes_contiguous(size);
  if (memory_format.has_value() && *memory_format != at::MemoryFormat::Preserve) {
    impl->empty_tensor_restride(*memory_format);
  }
  size_t needed = 0;
  if (self.numel() > 0) {
    int64_t max_offset = 0;
    for (int64_t d = 0; d < self.dim(); ++d) max_offset += (self.size(d) - 1) * self.stride(d);
    needed = static_cast<size_t>((self.storage_offset() + max_offset + 1) * self.element_size());
  }
  c10::StorageImpl* storage = self.storage().unsafeGetStorageImpl();
  if (needed > storage->nbytes()) {
    TORCH_CHECK(storage->resizable(), "Trying to resize storage that is not resizable");
    c10::DataPtr fresh = allocate_device_memory(needed, self.device().index(), self.device());
    const size_t kept = storage->nbytes();
    void* fresh_data = fresh.get();
    c10::DataPtr old = storage->set_data_ptr(std::move(fresh));
    storage->set_nbytes(needed);
    if (kept > 0 && is_recording()) {
      // Inside a capture the old memory's contents are those the recorded work leaves there
      // at replay (other views of this storage may have been written already): the graph
      // copies them at replay, and keeps the old memory alive for that.
      const void* old_data = old.get();
      at::Tensor old_bytes = npu_tensor_over(
          c10::Storage(c10::Storage::use_byte_size_t(), kept, std::move(old), npu_allocator(), false),
          at::empty({static_cast<int64_t>(kept)}, at::TensorOptions().dtype(at::kByte).device(at::kMeta)));
      std::vector<observe::TensorAccess> accesses;
      observe::add_access(accesses, old_bytes, false, false, "self");
      observe::add_access(accesses, self, true, false, "self");
      record_host_call(observe::replayed_node("aten::resize_", self.device().index(), std::move(accesses),
                                              [fresh_data, old_data, kept]() { std::memcpy(fresh_data, old_data, kept); }),
                       {old_bytes, self});
    } else if (kept > 0) {
      std::memcpy(fresh_data, old.get(), kept);
    }
  }
  return self;
}

at::Tensor& npu_set_storage(at::Tensor& self, c10::Storage source, c10::SymInt storage_offset,
                            c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  TORCH_CHECK(source.device().type() == kNpu, "set_: expected an npu storage, got ", source.device());
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_storage_offset(storage_offset.expect_int());
  auto sz = C10_AS_INTARRAYREF_SLOW(size);
  if (stride.empty()) {
    impl->set_sizes_contiguous(sz);
  } else {
    impl->set_sizes_and_strides(sz, C10_AS_INTARRAYREF_SLOW(stride));
  }
  return self;
}

at::Tensor& npu_set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  std::vector<c10::SymInt> sz{c10::SymInt(n)};
  return npu_set_storage(self, std::move(source), 0, sz, {});
}

at::Tensor& npu_set_tensor(at::Tensor& self, const at::Tensor& source) {
  if (self.unsafeGetTensorImpl() == source.unsafeGetTensorImpl()) return self;
  return npu_set_storage(self, source.storage(), source.storage_offset(), source.sym_sizes(), source.sym_strides());
}

at::Tensor& npu_set_empty(at::Tensor& self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0,
                       allocate_device_memory(0, self.device().index(), self.device()), npu_allocator(), true);
  std::vector<c10::SymInt> sz{c10::SymInt(0)};
  return npu_set_storage(self, std::move(storage), 0, sz, {});
}

void npu_record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kNpu, "record_stream expects an npu stream, got one of ", stream.device());
  TORCH_CHECK(stream.device_index() == self.device().index(), "record_stream: the tensor is on ", self.device(),
              " but the stream belongs to ", stream.device());
  observe::on_record_stream(self, stream);
}

at::Scalar npu_local_scalar_dense(const at::Tensor& self) {
  check_not_capturing("reading a value to the host (.item(), bool(tensor), printing)");
  static const std::string name = "aten::_local_scalar_dense";
  observe::KernelLaunch launch(observe::WorkKind::Memcpy, name);
  const c10::Stream stream = current_stream(self.device().index());
  if (launch.active()) {
    observe::add_access(launch.accesses(), self, false, false, "self");
    launch.start(stream);
  }
  at::Scalar value = at::_local_scalar_dense(cpu_alias(self));
  observe::on_stream_synchronize(stream);  // the host waited for the value
  return value;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", TORCH_FN(npu_empty));
  m.impl("empty_strided", TORCH_FN(npu_empty_strided));
  m.impl("_copy_from", TORCH_FN(npu_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(npu_copy_from_and_resize));
  m.impl("resize_", TORCH_FN(npu_resize_));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(npu_set_storage));
  m.impl("set_.source_Storage", TORCH_FN(npu_set_source_storage));
  m.impl("set_.source_Tensor", TORCH_FN(npu_set_tensor));
  m.impl("set_", TORCH_FN(npu_set_empty));
  m.impl("record_stream", TORCH_FN(npu_record_stream));
  m.impl("_local_scalar_dense", TORCH_FN(npu_local_scalar_dense));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  // The generic composites of these losses resize a 0-dim output (a deprecation warning
  // on every call); the CPU kernels, reached through the fallback, do not.
  m.impl("mse_loss", torch::CppFunction::makeFromBoxedFunction<&npu_fallback>());
  m.impl("smooth_l1_loss", torch::CppFunction::makeFromBoxedFunction<&npu_fallback>());
}

}  // namespace torch_npu

namespace torch_npu {

void route_composites_with_cpu_kernels_to_fallback(torch::Library& m, c10::DispatchKey cpu_key,
                                                   c10::DispatchKey device_key) {
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const c10::OperatorName& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op.has_value() || !op->hasKernelForDispatchKey(cpu_key)) continue;
    if (op->hasKernelForDispatchKey(device_key)) continue;
    if (!op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
        !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) &&
        !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd)) {
      continue;
    }
    std::string qualified = name.name.substr(6);
    if (!name.overload_name.empty()) qualified += "." + name.overload_name;
    m.impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&npu_fallback>());
  }
}

// The fast paths, registered when the library loads: each registration updates only its
// own operator, and a kernel a program registers later for one of these operators
// replaces ours, as it would replace any kernel registered at load.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_matmul_attention_fast_paths(m);
  register_model_op_fast_paths(m);
  register_elementwise_fast_paths(m);
  register_comparison_fast_paths(m);
  register_fill_copy_fast_paths(m);
  register_cat_fast_path(m);
}

// The fallback, then the operators with both a CPU kernel and a generic composite one:
// npu would otherwise get the composite (for native_group_norm/native_layer_norm a
// different formula, off by more than the reduced-precision tolerance), while npu promises
// the CPU kernel's results. Registered at the device's initialisation
// (deferred_registrations.h), after every kernel the library registers when it loads; the
// routing leaves alone every operator that has an npu kernel by then (ours or a program's).
void register_dense_fallback() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Never destroyed: the registrations last as long as the process, and the exit skips
    // recomputing every operator's table to remove them.
    auto* fallback = new torch::Library(torch::Library::IMPL, "_", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    fallback->fallback(torch::CppFunction::makeFromBoxedFunction<&npu_fallback>());
    auto* m = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    route_composites_with_cpu_kernels_to_fallback(*m, c10::DispatchKey::CPU, c10::DispatchKey::PrivateUse1);
  });
}

}  // namespace torch_npu
