// c10_npu::NPUEvent: an npu event as C++ extensions see it, the counterpart of
// at::cuda::CUDAEvent. It is created lazily at its first record, on the recording
// stream's device, and is the same kind of event as torch.npu.Event.
#pragma once

#include <c10/core/Device.h>
#include <c10/core/Event.h>
#include <c10/util/Optional.h>

#include <memory>

#include "third_party/acl/inc/acl/acl_base.h"
#include "torch_npu/csrc/core/npu/NPUMacros.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"

namespace c10_npu {

struct TORCH_NPU_API NPUEvent {
  // flags: ACL_EVENT_* (ACL_EVENT_TIME_LINE for a timing event).
  NPUEvent();
  explicit NPUEvent(unsigned int flags);
  // Opens an event another process shared through ipc_handle(); the simulated NPU runs in
  // one process per device set and raises, naming the alternative.
  NPUEvent(c10::DeviceIndex device_index, const aclrtIpcEventHandle* handle);
  ~NPUEvent();

  NPUEvent(const NPUEvent&) = delete;
  NPUEvent& operator=(const NPUEvent&) = delete;
  NPUEvent(NPUEvent&& other) noexcept;
  NPUEvent& operator=(NPUEvent&& other) noexcept;

  operator aclrtEvent() const { return event(); }

  // The device of the event once recorded, else nullopt.
  c10::optional<at::Device> device() const;
  bool isCreated() const;
  c10::DeviceIndex device_index() const;
  // The event's handle, nullptr until first recorded.
  aclrtEvent event() const;

  // True when the work before the last record has completed (or nothing was recorded).
  bool query() const;
  void record();  // on the current stream of the current device
  void record(const NPUStream& stream);
  void recordOnce(const NPUStream& stream);  // records only if never recorded
  // Makes future work on `stream` wait for the recorded point.
  void block(const NPUStream& stream);
  // Milliseconds from this event to `other`; both timing events, both recorded.
  float elapsed_time(const NPUEvent& other) const;
  void synchronize() const;
  void ipc_handle(aclrtIpcEventHandle* handle);

 private:
  unsigned int flags_ = ACL_EVENT_DEFAULT;
  std::unique_ptr<c10::Event> event_;
};

}  // namespace c10_npu
