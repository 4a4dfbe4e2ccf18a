// Device and stream guards of the npu, the counterparts of c10::cuda::CUDAGuard and
// CUDAStreamGuard: RAII over torch's own guards, so they nest with torch.npu.device /
// torch.npu.stream contexts entered from Python.
#pragma once

#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>

#include "torch_npu/csrc/core/npu/NPUMacros.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

namespace c10_npu {

// Sets the current npu device for its scope.
struct NPUGuard {
  explicit NPUGuard(c10::DeviceIndex device_index) : guard_(c10::Device(c10::DeviceType::PrivateUse1, device_index)) {}
  explicit NPUGuard(c10::Device device) : guard_(device) {}
  NPUGuard(const NPUGuard&) = delete;
  NPUGuard& operator=(const NPUGuard&) = delete;

  void set_device(c10::Device device) { guard_.reset_device(device); }
  void set_index(c10::DeviceIndex device_index) { guard_.set_index(device_index); }
  c10::Device original_device() const { return guard_.original_device(); }
  c10::Device current_device() const { return guard_.current_device(); }

 private:
  c10::DeviceGuard guard_;
};

// Sets the current device and the current stream of that device for its scope.
struct NPUStreamGuard {
  explicit NPUStreamGuard(c10::Stream stream) : guard_(checked(stream)) {}
  NPUStreamGuard(const NPUStreamGuard&) = delete;
  NPUStreamGuard& operator=(const NPUStreamGuard&) = delete;

  // Restores the original stream of the previous device before setting `stream`.
  void reset_stream(c10::Stream stream) { guard_.reset_stream(checked(stream)); }

  NPUStream original_stream() const { return NPUStream(NPUStream::UNCHECKED, guard_.original_stream()); }
  NPUStream current_stream() const { return NPUStream(NPUStream::UNCHECKED, guard_.current_stream()); }
  c10::Device current_device() const { return guard_.current_device(); }
  c10::Device original_device() const { return guard_.original_device(); }

 private:
  static c10::Stream checked(c10::Stream stream) { return NPUStream(stream).unwrap(); }
  c10::StreamGuard guard_;
};

}  // namespace c10_npu
