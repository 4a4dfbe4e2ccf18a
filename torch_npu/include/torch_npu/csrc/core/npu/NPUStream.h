// c10_npu::NPUStream: an npu stream as C++ extensions see it, the counterpart of
// c10::cuda::CUDAStream. Streams are the runtime's own (torch.npu.current_stream() in
// Python is getCurrentNPUStream() here); aclrtStream is a stable opaque handle of one.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <ostream>

#include "third_party/acl/inc/acl/acl_base.h"
#include "torch_npu/csrc/core/npu/NPUMacros.h"

namespace c10_npu {

class TORCH_NPU_API NPUStream {
 public:
  enum Unchecked { UNCHECKED };

  // Raises unless `stream` is an npu stream.
  explicit NPUStream(c10::Stream stream);
  explicit NPUStream(Unchecked, c10::Stream stream) : stream_(stream) {}
  ~NPUStream() = default;

  bool operator==(const NPUStream& other) const noexcept { return unwrap() == other.unwrap(); }
  bool operator!=(const NPUStream& other) const noexcept { return unwrap() != other.unwrap(); }

  operator aclrtStream() const { return stream(); }
  operator c10::Stream() const { return unwrap(); }

  c10::DeviceType device_type() const { return stream_.device_type(); }
  c10::DeviceIndex device_index() const { return stream_.device_index(); }
  c10::Device device() const { return stream_.device(); }
  c10::StreamId id() const { return stream_.id(); }

  // True when all work queued on the stream has completed.
  bool query() const;
  // Waits for the stream's work (a host synchronisation: refused during graph capture).
  void synchronize() const;

  aclrtStream stream() const;
  // need_empty: wait until the stream's queue is empty before handing out the handle.
  aclrtStream stream(const bool need_empty) const;

  c10::Stream unwrap() const { return stream_; }

  c10::StreamData3 pack3() const { return stream_.pack3(); }
  static NPUStream unpack3(c10::StreamId stream_id, c10::DeviceIndex device_index, c10::DeviceType device_type) {
    return NPUStream(c10::Stream::unpack3(stream_id, device_index, device_type));
  }

  // Marks the stream as the one a data loader's preprocessing runs on.
  void setDataPreprocessStream(bool is_data_preprocess_stream);
  bool isDataPreprocessStream() const;

 private:
  c10::Stream stream_;
};

// A stream of the device's pool (round robin), as torch.npu.Stream() hands out.
TORCH_NPU_API NPUStream getNPUStreamFromPool(c10::DeviceIndex device = -1);
TORCH_NPU_API NPUStream getDefaultNPUStream(c10::DeviceIndex device_index = -1);
// The calling thread's current stream of the device (-1: the current device).
TORCH_NPU_API NPUStream getCurrentNPUStream(c10::DeviceIndex device_index = -1);
// Makes `stream` the calling thread's current stream of its device.
TORCH_NPU_API void setCurrentNPUStream(NPUStream stream);

// The stream an aclrtStream handle stands for; raises on a handle no stream handed out.
TORCH_NPU_API NPUStream streamFromHandle(aclrtStream handle);

TORCH_NPU_API std::ostream& operator<<(std::ostream& stream, const NPUStream& s);

}  // namespace c10_npu

namespace std {
template <>
struct hash<c10_npu::NPUStream> {
  size_t operator()(c10_npu::NPUStream s) const noexcept { return std::hash<c10::Stream>{}(s.unwrap()); }
};
}  // namespace std
