// Backend metadata of npu tensors: a dict[str, bool] per tensor (c10::BackendMeta), seen
// from Python through torch._utils.get_tensor_metadata/set_tensor_metadata, carried by
// shallow copies and by copies into fresh npu tensors (clone, .to), and saved by
// torch.save/torch.load through the TensorBackendMetaRegistry of PrivateUse1.
//
// The NPU storage format (torch_npu.npu_format_cast / get_npu_format) is kept here too:
// the simulated device stores every format as plain strided memory, so a format is only
// a recorded fact, serialised as the key "npu_format_<id>". ND (the default) is no entry.
#include "torch_npu/csrc/aten/fallback.h"
#include "torch_npu/csrc/runtime/device.h"

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickler_helper.h>

#include <map>
#include <string>

namespace torch_npu {
namespace {

constexpr int64_t kFormatND = 2;
constexpr const char* kFormatKeyPrefix = "npu_format_";

struct NpuBackendMeta final : public c10::BackendMeta {
  std::map<std::string, bool> flags;
  int64_t format = kFormatND;

  c10::intrusive_ptr<c10::BackendMeta> clone(const c10::intrusive_ptr<c10::BackendMeta>& /*ptr*/) const override {
    auto copy = c10::make_intrusive<NpuBackendMeta>();
    copy->flags = flags;
    copy->format = format;
    return copy;
  }
};

NpuBackendMeta* meta_of(const at::Tensor& t) {
  return dynamic_cast<NpuBackendMeta*>(t.unsafeGetTensorImpl()->get_backend_meta());
}

NpuBackendMeta& ensure_meta(const at::Tensor& t) {
  NpuBackendMeta* meta = meta_of(t);
  if (meta == nullptr) {
    t.unsafeGetTensorImpl()->set_backend_meta(c10::make_intrusive<NpuBackendMeta>());
    meta = meta_of(t);
  }
  return *meta;
}

void write_metadata(const at::Tensor& t, std::unordered_map<std::string, bool>& out) {
  const NpuBackendMeta* meta = meta_of(t);
  if (meta == nullptr) return;
  for (const auto& [key, value] : meta->flags) out[key] = value;
  if (meta->format != kFormatND) out[kFormatKeyPrefix + std::to_string(meta->format)] = true;
}

void read_metadata(const at::Tensor& t, std::unordered_map<std::string, bool>& in) {
  if (in.empty()) return;
  NpuBackendMeta& meta = ensure_meta(t);
  for (const auto& [key, value] : in) {
    if (key.rfind(kFormatKeyPrefix, 0) == 0) {
      if (value) meta.format = std::stoll(key.substr(std::string(kFormatKeyPrefix).size()));
    } else {
      meta.flags[key] = value;
    }
  }
}

struct RegisterSerialization {
  RegisterSerialization() { torch::jit::TensorBackendMetaRegistry(kNpu, &write_metadata, &read_metadata); }
};
RegisterSerialization register_serialization;

}  // namespace

void copy_backend_meta_if_absent(const at::Tensor& src, const at::Tensor& dst) {
  if (src.device().type() != kNpu || dst.device().type() != kNpu) return;
  const NpuBackendMeta* meta = meta_of(src);
  if (meta == nullptr || meta_of(dst) != nullptr) return;
  dst.unsafeGetTensorImpl()->set_backend_meta(meta->clone(nullptr));
}

int64_t npu_format_of(const at::Tensor& t) {
  const NpuBackendMeta* meta = meta_of(t);
  return meta == nullptr ? kFormatND : meta->format;
}

void set_npu_format(const at::Tensor& t, int64_t format) {
  TORCH_CHECK(t.device().type() == kNpu, "npu formats exist only for npu tensors, got a tensor on ", t.device());
  if (format == kFormatND && meta_of(t) == nullptr) return;
  ensure_meta(t).format = format;
}

}  // namespace torch_npu
