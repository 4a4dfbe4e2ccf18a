// c10_npu::NPUStream over the runtime's streams (the PrivateUse1 guard implementation),
// and the aclrtStream handles extensions pass around: one stable handle per stream,
// mapped back to the stream by streamFromHandle.
#include "torch_npu/csrc/core/npu/NPUStream.h"

#include <c10/core/impl/VirtualGuardImpl.h>

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_set>

#include "torch_npu/csrc/runtime/device.h"

namespace c10_npu {
namespace {

struct StreamHandle {
  c10::DeviceIndex device;
  c10::StreamId id;
};

struct StreamRegistry {
  std::mutex mu;
  std::map<std::pair<c10::DeviceIndex, c10::StreamId>, std::unique_ptr<StreamHandle>> handles;
  std::unordered_set<const StreamHandle*> known;
  std::set<std::pair<c10::DeviceIndex, c10::StreamId>> data_preprocess;
};

StreamRegistry& registry() {
  static auto* r = new StreamRegistry();  // never destroyed: handles outlive static teardown
  return *r;
}

c10::impl::VirtualGuardImpl& guard() {
  static c10::impl::VirtualGuardImpl impl(torch_npu::kNpu);
  return impl;
}

c10::DeviceIndex resolve(c10::DeviceIndex device, const char* what) {
  c10::DeviceIndex idx = device < 0 ? torch_npu::current_device() : device;
  torch_npu::check_device_index(idx, what);
  return idx;
}

}  // namespace

NPUStream::NPUStream(c10::Stream stream) : stream_(stream) {
  TORCH_CHECK(stream_.device_type() == torch_npu::kNpu, "NPUStream: expected an npu stream, got a stream of ",
              stream_.device());
}

bool NPUStream::query() const { return guard().queryStream(stream_); }

void NPUStream::synchronize() const { guard().synchronizeStream(stream_); }

aclrtStream NPUStream::stream() const {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto& slot = r.handles[{stream_.device_index(), stream_.id()}];
  if (!slot) {
    slot = std::make_unique<StreamHandle>(StreamHandle{stream_.device_index(), stream_.id()});
    r.known.insert(slot.get());
  }
  return slot.get();
}

aclrtStream NPUStream::stream(const bool need_empty) const {
  // Work runs as it is queued, so the queue is always empty when the host asks.
  return stream();
}

void NPUStream::setDataPreprocessStream(bool is_data_preprocess_stream) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::pair<c10::DeviceIndex, c10::StreamId> key{stream_.device_index(), stream_.id()};
  if (is_data_preprocess_stream) {
    r.data_preprocess.insert(key);
  } else {
    r.data_preprocess.erase(key);
  }
}

bool NPUStream::isDataPreprocessStream() const {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.data_preprocess.count({stream_.device_index(), stream_.id()}) > 0;
}

NPUStream getNPUStreamFromPool(c10::DeviceIndex device) {
  c10::DeviceIndex idx = resolve(device, "getNPUStreamFromPool");
  return NPUStream(guard().getStreamFromGlobalPool(c10::Device(torch_npu::kNpu, idx), /*isHighPriority=*/false));
}

NPUStream getDefaultNPUStream(c10::DeviceIndex device_index) {
  c10::DeviceIndex idx = resolve(device_index, "getDefaultNPUStream");
  return NPUStream(guard().getDefaultStream(c10::Device(torch_npu::kNpu, idx)));
}

NPUStream getCurrentNPUStream(c10::DeviceIndex device_index) {
  c10::DeviceIndex idx = resolve(device_index, "getCurrentNPUStream");
  return NPUStream(guard().getStream(c10::Device(torch_npu::kNpu, idx)));
}

void setCurrentNPUStream(NPUStream stream) { guard().exchangeStream(stream.unwrap()); }

NPUStream streamFromHandle(aclrtStream handle) {
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  const auto* h = static_cast<const StreamHandle*>(handle);
  TORCH_CHECK(handle != nullptr && r.known.count(h) > 0, "aclrtStream ", handle,
              " is not the handle of an npu stream: take it from NPUStream::stream() (or getCurrentNPUStream())");
  return NPUStream(c10::Stream(c10::Stream::UNSAFE, c10::Device(torch_npu::kNpu, h->device), h->id));
}

std::ostream& operator<<(std::ostream& stream, const NPUStream& s) { return stream << s.unwrap(); }

}  // namespace c10_npu
