// Which card the simulated devices pretend to be (TORCH_NPU_DEVICE_MODEL).
//
// A profile carries what PyTorch and users read of a real Ascend card: its name, its
// memory (the allocator enforces it as capacity, so a model that does not fit the card
// runs out of memory here too), its core counts and cache, and the dtypes it computes.
// Figures are the published ones: memory and AI-core counts as the cards report them
// to cluster schedulers, cube/vector core counts and L2 size from the CANN platform
// configuration of each SoC. Without the variable the devices stay the generic
// simulated NPU.
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/device_model.h"
#include "torch_npu/csrc/runtime/env_settings.h"

#include <ATen/ATen.h>
#include <c10/core/DeviceCapability.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

namespace torch_npu {
namespace {

constexpr int64_t kMiB = 1LL << 20;

std::vector<DeviceProfile> build_profiles() {
  // name, memory, cube cores, vector cores, L2, capability, bf16, arch
  return {
      {"Ascend910B1", 65536 * kMiB, 24, 48, 192 * kMiB, 2, 2, true, "dav-c220"},
      {"Ascend910B2", 65536 * kMiB, 24, 48, 192 * kMiB, 2, 2, true, "dav-c220"},
      {"Ascend910B2C", 65536 * kMiB, 24, 48, 192 * kMiB, 2, 2, true, "dav-c220"},
      {"Ascend910B3", 65536 * kMiB, 20, 40, 192 * kMiB, 2, 2, true, "dav-c220"},
      {"Ascend910B4", 32768 * kMiB, 20, 40, 96 * kMiB, 2, 2, true, "dav-c220"},
      // The 310P inference chips: AI cores (no cube/vector split, so vector_core_num
      // counts the extra vector cores), LPDDR memory; no bfloat16 arithmetic.
      {"Ascend310P1", 24576 * kMiB, 10, 8, 0, 2, 0, false, "dav-m200"},
      {"Ascend310P3", 24576 * kMiB, 8, 7, 0, 2, 0, false, "dav-m200"},
  };
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

DeviceProfile resolve_profile() {
  DeviceProfile generic{"Simulated Ascend NPU", 16384 * kMiB, 8, 8, 32 * kMiB, 1, 0, true, "simulated"};
  std::optional<std::string> env = env_settings::read("TORCH_NPU_DEVICE_MODEL");
  if (!env) return generic;
  std::string wanted = upper(*env);
  if (wanted.rfind("ASCEND", 0) != 0) wanted = "ASCEND" + wanted;
  std::ostringstream known;
  for (const auto& p : device_profiles()) {
    if (upper(p.name) == wanted) return p;
    known << (known.tellp() > 0 ? ", " : "") << p.name;
  }
  env_settings::refuse("TORCH_NPU_DEVICE_MODEL", *env,
                       "a known Ascend device model: " + known.str() +
                           " (the 'Ascend' prefix is optional); unset it for the generic simulated NPU");
}

}  // namespace

const std::vector<DeviceProfile>& device_profiles() {
  static const std::vector<DeviceProfile> profiles = build_profiles();
  return profiles;
}

const DeviceProfile& device_profile() {
  // Resolved once; a bad name raises every time it is asked, never half-initialises.
  static const DeviceProfile profile = resolve_profile();
  return profile;
}

c10::DeviceCapability device_capability(c10::DeviceIndex device) {
  check_device_index(device, "get_device_capability");
  c10::DeviceCapability cap;
  // Kernels run on host memory through the CPU kernels, so every dtype the CPU can
  // allocate and copy is supported, except the quantized ones (npu tensors have no
  // quantizer), the sub-byte integers (no copy kernel) and, on cards without it, bfloat16.
  auto& bits = cap.capability_data.capability_bits;
  for (int index : {c10::kIndex_QInt8, c10::kIndex_QUInt8, c10::kIndex_QInt32, c10::kIndex_QUInt4x2,
                    c10::kIndex_QUInt2x4, c10::kIndex_UInt1, c10::kIndex_UInt2, c10::kIndex_UInt3,
                    c10::kIndex_UInt4, c10::kIndex_UInt5, c10::kIndex_UInt6, c10::kIndex_UInt7, c10::kIndex_Int1,
                    c10::kIndex_Int2, c10::kIndex_Int3, c10::kIndex_Int4, c10::kIndex_Int5, c10::kIndex_Int6,
                    c10::kIndex_Int7}) {
    bits &= ~(1ULL << index);
  }
  if (!device_profile().bf16) bits &= ~(1ULL << c10::kIndex_BFloat16);
  return cap;
}

}  // namespace torch_npu
