// Device guard, streams and events of the simulated NPU.
//
// Work runs synchronously on the host, so a stream is an ordering identity and an event
// is a point in time: recording stamps it, waiting has nothing left to wait for. Syncing
// the host with the device is illegal during graph capture, as on real hardware.
#include "torch_npu/csrc/runtime/device.h"
#include "torch_npu/csrc/runtime/device_model.h"
#include "torch_npu/csrc/runtime/stream.h"
#include "torch_npu/csrc/graphs/capture.h"
#include "torch_npu/csrc/observe/npu_observe.h"

#include <ATen/ATen.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <array>
#include <atomic>
#include <chrono>

namespace torch_npu {
namespace {

constexpr int kMaxDevices = 64;
constexpr c10::StreamId kStreamPoolSize = 32;

// Per-thread current stream id for each device (0 = default stream).
thread_local std::array<c10::StreamId, kMaxDevices> tls_current_stream{};
std::atomic<c10::StreamId> g_next_stream_id{kStreamPoolSize + 1};
std::atomic<uint32_t> g_pool_cursor{0};

struct NpuEvent {
  c10::DeviceIndex device;
  bool timing;
  bool recorded = false;
  std::chrono::steady_clock::time_point stamp;
  c10::StreamId stream = 0;
  uint64_t capture = 0;  // the capture its stream was in when recorded (0: none)
};

c10::Stream make_stream(c10::DeviceIndex device, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kNpu, device), id);
}

struct NpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override { return kNpu; }

  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kNpu, "Expected a npu device, but got: ", d);
    c10::Device old = getDevice();
    if (old.index() != d.index()) set_current_device(d.index());
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(kNpu, current_device()); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kNpu, "Expected a npu device, but got: ", d);
    set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0 && d.index() < device_count()) {
      try {
        set_current_device(d.index());
      } catch (...) {
      }
    }
  }

  c10::Stream getStream(c10::Device d) const override {
    c10::DeviceIndex idx = d.index() < 0 ? current_device() : d.index();
    return make_stream(idx, tls_current_stream[idx]);
  }
  c10::Stream getDefaultStream(c10::Device d) const override {
    c10::DeviceIndex idx = d.index() < 0 ? current_device() : d.index();
    return make_stream(idx, 0);
  }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool /*high_priority*/) const override {
    c10::DeviceIndex idx = d.index() < 0 ? current_device() : d.index();
    check_device_index(idx, "stream creation");
    return make_stream(idx, 1 + (g_pool_cursor++ % kStreamPoolSize));
  }
  c10::Stream getNewStream(c10::Device d, int /*priority*/) const override {
    c10::DeviceIndex idx = d.index() < 0 ? current_device() : d.index();
    check_device_index(idx, "stream creation");
    lazy_init();
    return make_stream(idx, g_next_stream_id++);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    TORCH_CHECK(s.device_type() == kNpu, "expected an npu stream, got a stream of ", s.device());
    c10::DeviceIndex idx = s.device_index();
    check_device_index(idx, "set_stream");
    c10::Stream old = make_stream(idx, tls_current_stream[idx]);
    tls_current_stream[idx] = s.id();
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "Event device index ", static_cast<int>(device_index),
                " does not match recording stream's device ", stream.device(),
                ": record the event on a stream of the device it was created for");
    auto* ev = static_cast<NpuEvent*>(*event);
    if (ev == nullptr) {
      ev = new NpuEvent{stream.device_index(), flag == c10::EventFlag::BACKEND_DEFAULT ? true : false};
      *event = ev;
    }
    TORCH_CHECK(ev->device == stream.device_index(), "Event was created on npu:",
                static_cast<int>(ev->device), " but is recorded on a stream of ", stream.device(),
                ": record it on a stream of npu:", static_cast<int>(ev->device));
    ev->recorded = true;
    ev->stream = stream.id();
    ev->stamp = std::chrono::steady_clock::now();
    ev->capture = capture_id_of_stream(stream);
    observe::on_event_record(ev, stream);
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (event == nullptr) return;
    // All earlier work has already completed on the host; a wait on an event of a
    // capturing stream makes the waiting stream part of that capture (a fork); observers
    // track the ordering.
    auto* ev = static_cast<NpuEvent*>(event);
    if (ev->capture != 0 && is_capture_underway(ev->capture)) join_capture(ev->capture, stream);
    observe::on_event_wait(event, stream);
  }
  bool queryEvent(void* /*event*/) const override { return true; }
  void destroyEvent(void* event, const c10::DeviceIndex /*device_index*/) const noexcept override {
    observe::on_event_destroy(event);
    delete static_cast<NpuEvent*>(event);
  }
  bool queryStream(const c10::Stream& /*stream*/) const override { return true; }
  void synchronizeStream(const c10::Stream& stream) const override {
    check_stream_sync(stream, "stream synchronization");
    observe::on_stream_synchronize(stream);
  }
  void synchronizeEvent(void* event) const override {
    auto* ev = static_cast<NpuEvent*>(event);
    if (ev != nullptr && ev->recorded) {
      check_stream_sync(make_stream(ev->device, ev->stream), "event synchronization");
    } else {
      check_not_capturing("event synchronization");
    }
    if (event != nullptr) observe::on_event_synchronize(event);
  }
  void synchronizeDevice(const c10::DeviceIndex device_index) const override {
    check_device_sync(device_index < 0 ? current_device() : device_index,
                      "device synchronization (torch.npu.synchronize)");
    observe::on_device_synchronize(device_index);
  }
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    return device_capability(d.has_index() ? d.index() : current_device());
  }
  bool isStreamCapturing(const c10::Stream& stream) const override { return capture_id_of_stream(stream) != 0; }
  void recordDataPtrOnStream(const c10::DataPtr& /*data_ptr*/, const c10::Stream& /*stream*/) const override {
    // Memory is reused only after the host has finished every kernel that used it.
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex /*device_index*/) const override {
    auto* a = static_cast<NpuEvent*>(start);
    auto* b = static_cast<NpuEvent*>(end);
    TORCH_CHECK(a != nullptr && b != nullptr && a->recorded && b->recorded,
                "elapsed_time needs both events to have been recorded first");
    TORCH_CHECK(a->timing && b->timing,
                "elapsed_time needs events created with enable_timing=True");
    return std::chrono::duration<double, std::milli>(b->stamp - a->stamp).count();
  }
};

}  // namespace

double event_elapsed_ms(void* start, void* end) {
  static NpuGuardImpl impl;
  return impl.elapsedTime(start, end, -1);
}

c10::Stream current_stream(c10::DeviceIndex device) { return make_stream(device, tls_current_stream[device]); }

C10_REGISTER_GUARD_IMPL(PrivateUse1, NpuGuardImpl);

}  // namespace torch_npu
