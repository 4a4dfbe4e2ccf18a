// c10_npu::NPUEvent over c10::Event of the npu: the same events torch.npu.Event makes,
// so recording, waiting and timing follow the runtime's (and graph capture's) rules.
#include "torch_npu/csrc/core/npu/NPUEvent.h"

#include "torch_npu/csrc/runtime/device.h"

namespace c10_npu {
namespace {

c10::EventFlag event_flag(unsigned int flags) {
  // BACKEND_DEFAULT is the npu's timing event.
  return (flags & ACL_EVENT_TIME_LINE) != 0 ? c10::EventFlag::BACKEND_DEFAULT : c10::EventFlag::PYTORCH_DEFAULT;
}

[[noreturn]] void no_ipc() {
  TORCH_CHECK(false,
              "NPUEvent IPC handles are not available on the simulated NPU: its devices live in one process. "
              "Share tensors between processes with torch.multiprocessing and order work within the process with "
              "events.");
}

}  // namespace

NPUEvent::NPUEvent() : NPUEvent(ACL_EVENT_DEFAULT) {}

NPUEvent::NPUEvent(unsigned int flags)
    : flags_(flags), event_(std::make_unique<c10::Event>(torch_npu::kNpu, event_flag(flags))) {}

NPUEvent::NPUEvent(c10::DeviceIndex /*device_index*/, const aclrtIpcEventHandle* /*handle*/) { no_ipc(); }

NPUEvent::~NPUEvent() = default;

NPUEvent::NPUEvent(NPUEvent&& other) noexcept = default;
NPUEvent& NPUEvent::operator=(NPUEvent&& other) noexcept = default;

c10::optional<at::Device> NPUEvent::device() const {
  if (!isCreated()) return c10::nullopt;
  return at::Device(torch_npu::kNpu, event_->device_index());
}

bool NPUEvent::isCreated() const { return event_ && event_->was_marked_for_recording(); }

c10::DeviceIndex NPUEvent::device_index() const { return event_ ? event_->device_index() : -1; }

aclrtEvent NPUEvent::event() const { return event_ ? event_->eventId() : nullptr; }

bool NPUEvent::query() const { return !isCreated() || event_->query(); }

void NPUEvent::record() { record(getCurrentNPUStream()); }

void NPUEvent::record(const NPUStream& stream) {
  TORCH_CHECK(event_, "NPUEvent: recording a moved-from event");
  event_->record(stream.unwrap());
}

void NPUEvent::recordOnce(const NPUStream& stream) {
  if (!isCreated()) record(stream);
}

void NPUEvent::block(const NPUStream& stream) {
  if (isCreated()) event_->block(stream.unwrap());
}

float NPUEvent::elapsed_time(const NPUEvent& other) const {
  TORCH_CHECK(isCreated() && other.isCreated(), "NPUEvent::elapsed_time: both events must be recorded first");
  return static_cast<float>(event_->elapsedTime(*other.event_));
}

void NPUEvent::synchronize() const {
  if (isCreated()) event_->synchronize();
}

void NPUEvent::ipc_handle(aclrtIpcEventHandle* /*handle*/) { no_ipc(); }

}  // namespace c10_npu
