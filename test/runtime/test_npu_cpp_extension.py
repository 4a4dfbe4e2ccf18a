"""The public C++ API: a real C++ extension built against ``torch_npu/include`` and linked
with ``-ltorch_npu`` shares the runtime of ``torch_npu._C`` (its streams, its caching
allocator, its generators, its sync debug mode), registers a ``PrivateUse1`` kernel for a
custom operator that runs eagerly, under ``torch.compile`` and inside an NPU graph, and
references every ``cpp`` name of the public API listing (so each is declared with its
listed signature and exported by ``libtorch_npu.so``).

One extension, compiled once per test module (its build directory is a temporary one).
"""
from __future__ import annotations

import csv
import json
import os

import pytest
import torch

import torch_npu  # noqa: F401  (registers the npu device)
from torch_npu.utils.cpp_extension import include_paths, library_paths

HERE = os.path.dirname(os.path.abspath(__file__))
API_LISTING = os.path.join(HERE, "..", "ascend", "torch_npu_public_api.tsv")

# Every `cpp` row of the public API listing, with a C++ check that it is declared with its
# listed signature: a function's address taken through its exact type (which also makes the
# extension link against the symbol), or a type trait for constructors and destructors.
_E = "c10_npu::NPUEvent"
_S = "c10_npu::NPUStream"
_G = "at_npu::NPUGeneratorImpl"
_C = "at_npu::native::OpCommand"
_SG = "c10_npu::NPUStreamGuard"
_OPT_FMT = "const c10::optional<aclFormat>&"
NAME_CHECKS = {
    "torch_npu::init_npu(const c10::DeviceIndex device_index = 0)":
        "static_cast<void (*)(const c10::DeviceIndex)>(&torch_npu::init_npu)",
    "torch_npu::init_npu(const std::string& device_str)":
        "static_cast<void (*)(const std::string&)>(&torch_npu::init_npu)",
    "torch_npu::init_npu(const at::Device& device)": "static_cast<void (*)(const at::Device&)>(&torch_npu::init_npu)",
    "torch_npu::finalize_npu": "static_cast<void (*)()>(&torch_npu::finalize_npu)",
    "torch::npu::synchronize": "static_cast<void (*)(int64_t)>(&torch::npu::synchronize)",
    "c10::npu::current_device": "static_cast<c10::DeviceIndex (*)()>(&c10::npu::current_device)",
    f"{_E}::NPUEvent()": f"std::is_default_constructible_v<{_E}>",
    f"{_E}::NPUEvent(unsigned int flags)": f"std::is_constructible_v<{_E}, unsigned int>",
    f"{_E}::NPUEvent(c10::DeviceIndex device_index, const aclrtIpcEventHandle* handle)":
        f"std::is_constructible_v<{_E}, c10::DeviceIndex, const aclrtIpcEventHandle*>",
    f"{_E}::~NPUEvent()": f"std::is_destructible_v<{_E}>",
    f"{_E}::NPUEvent({_E}&& other)": f"std::is_move_constructible_v<{_E}>",
    f"{_E}::aclrtEvent": f"static_cast<aclrtEvent ({_E}::*)() const>(&{_E}::operator aclrtEvent)",
    f"{_E}::device": f"static_cast<c10::optional<at::Device> ({_E}::*)() const>(&{_E}::device)",
    f"{_E}::isCreated": f"static_cast<bool ({_E}::*)() const>(&{_E}::isCreated)",
    f"{_E}::device_index": f"static_cast<c10::DeviceIndex ({_E}::*)() const>(&{_E}::device_index)",
    f"{_E}::event": f"static_cast<aclrtEvent ({_E}::*)() const>(&{_E}::event)",
    f"{_E}::query": f"static_cast<bool ({_E}::*)() const>(&{_E}::query)",
    f"{_E}::record()": f"static_cast<void ({_E}::*)()>(&{_E}::record)",
    f"{_E}::record(const {_S}& stream)": f"static_cast<void ({_E}::*)(const {_S}&)>(&{_E}::record)",
    f"{_E}::recordOnce": f"static_cast<void ({_E}::*)(const {_S}&)>(&{_E}::recordOnce)",
    f"{_E}::block": f"static_cast<void ({_E}::*)(const {_S}&)>(&{_E}::block)",
    f"{_E}::elapsed_time": f"static_cast<float ({_E}::*)(const {_E}&) const>(&{_E}::elapsed_time)",
    f"{_E}::synchronize": f"static_cast<void ({_E}::*)() const>(&{_E}::synchronize)",
    f"{_E}::ipc_handle": f"static_cast<void ({_E}::*)(aclrtIpcEventHandle*)>(&{_E}::ipc_handle)",
    f"{_G}::NPUGeneratorImpl":
        f"std::is_constructible_v<{_G}, c10::DeviceIndex> && std::is_default_constructible_v<{_G}>",
    f"{_G}::clone": f"static_cast<std::shared_ptr<{_G}> ({_G}::*)() const>(&{_G}::clone)",
    f"{_G}::set_current_seed": f"static_cast<void ({_G}::*)(uint64_t)>(&{_G}::set_current_seed)",
    f"{_G}::set_offset": f"static_cast<void ({_G}::*)(uint64_t)>(&{_G}::set_offset)",
    f"{_G}::current_seed": f"static_cast<uint64_t ({_G}::*)() const>(&{_G}::current_seed)",
    f"{_G}::get_offset": f"static_cast<uint64_t ({_G}::*)() const>(&{_G}::get_offset)",
    f"{_G}::seed": f"static_cast<uint64_t ({_G}::*)()>(&{_G}::seed)",
    f"{_G}::set_state": f"static_cast<void ({_G}::*)(const c10::TensorImpl&)>(&{_G}::set_state)",
    f"{_G}::get_state": f"static_cast<c10::intrusive_ptr<c10::TensorImpl> ({_G}::*)() const>(&{_G}::get_state)",
    f"{_G}::set_philox_offset_per_thread":
        f"static_cast<void ({_G}::*)(uint64_t)>(&{_G}::set_philox_offset_per_thread)",
    f"{_G}::philox_offset_per_thread": f"static_cast<uint64_t ({_G}::*)() const>(&{_G}::philox_offset_per_thread)",
    f"{_G}::philox_npu_state": f"static_cast<at_npu::PhiloxNpuState ({_G}::*)(uint64_t)>(&{_G}::philox_npu_state)",
    f"{_G}::philox_engine_inputs":
        f"static_cast<std::pair<uint64_t, uint64_t> ({_G}::*)(uint64_t)>(&{_G}::philox_engine_inputs)",
    f"{_G}::device_type": f"static_cast<c10::DeviceType (*)()>(&{_G}::device_type)",
    "at_npu::detail::getDefaultNPUGenerator":
        "static_cast<const at::Generator& (*)(c10::DeviceIndex)>(&at_npu::detail::getDefaultNPUGenerator)",
    "at_npu::detail::createNPUGenerator":
        "static_cast<at::Generator (*)(c10::DeviceIndex)>(&at_npu::detail::createNPUGenerator)",
    f"{_S}::NPUStream(c10::Stream stream)": f"std::is_constructible_v<{_S}, c10::Stream>",
    f"{_S}::NPUStream(Unchecked, c10::Stream stream)": f"std::is_constructible_v<{_S}, {_S}::Unchecked, c10::Stream>",
    f"{_S}::~NPUStream": f"std::is_destructible_v<{_S}>",
    f"{_S}::operator==": f"static_cast<bool ({_S}::*)(const {_S}&) const noexcept>(&{_S}::operator==)",
    f"{_S}::operator!=": f"static_cast<bool ({_S}::*)(const {_S}&) const noexcept>(&{_S}::operator!=)",
    "aclrtStream": f"static_cast<aclrtStream ({_S}::*)() const>(&{_S}::operator aclrtStream)",
    "c10::Stream": f"static_cast<c10::Stream ({_S}::*)() const>(&{_S}::operator c10::Stream)",
    f"{_S}::device_type": f"static_cast<c10::DeviceType ({_S}::*)() const>(&{_S}::device_type)",
    f"{_S}::device_index": f"static_cast<c10::DeviceIndex ({_S}::*)() const>(&{_S}::device_index)",
    f"{_S}::device": f"static_cast<c10::Device ({_S}::*)() const>(&{_S}::device)",
    f"{_S}::id": f"static_cast<c10::StreamId ({_S}::*)() const>(&{_S}::id)",
    f"{_S}::query": f"static_cast<bool ({_S}::*)() const>(&{_S}::query)",
    f"{_S}::synchronize": f"static_cast<void ({_S}::*)() const>(&{_S}::synchronize)",
    f"{_S}::stream()": f"static_cast<aclrtStream ({_S}::*)() const>(&{_S}::stream)",
    f"{_S}::unwrap": f"static_cast<c10::Stream ({_S}::*)() const>(&{_S}::unwrap)",
    f"{_S}::pack3": f"static_cast<c10::StreamData3 ({_S}::*)() const>(&{_S}::pack3)",
    f"{_S}::unpack3": f"static_cast<{_S} (*)(c10::StreamId, c10::DeviceIndex, c10::DeviceType)>(&{_S}::unpack3)",
    f"{_S}::setDataPreprocessStream": f"static_cast<void ({_S}::*)(bool)>(&{_S}::setDataPreprocessStream)",
    f"{_S}::isDataPreprocessStream": f"static_cast<bool ({_S}::*)() const>(&{_S}::isDataPreprocessStream)",
    f"{_S}::stream(const bool need_empty)": f"static_cast<aclrtStream ({_S}::*)(const bool) const>(&{_S}::stream)",
    "c10_npu::getNPUStreamFromPool": f"static_cast<{_S} (*)(c10::DeviceIndex)>(&c10_npu::getNPUStreamFromPool)",
    "c10_npu::getDefaultNPUStream": f"static_cast<{_S} (*)(c10::DeviceIndex)>(&c10_npu::getDefaultNPUStream)",
    "c10_npu::getCurrentNPUStream": f"static_cast<{_S} (*)(c10::DeviceIndex)>(&c10_npu::getCurrentNPUStream)",
    "c10_npu::setCurrentNPUStream": f"static_cast<void (*)({_S})>(&c10_npu::setCurrentNPUStream)",
    f"{_C}::OpCommand": f"std::is_default_constructible_v<{_C}>",
    f"{_C}::~OpCommand": f"std::is_destructible_v<{_C}>",
    f"{_C}::Name": f"static_cast<{_C}& ({_C}::*)(const std::string&)>(&{_C}::Name)",
    f"{_C}::SetCustomHandler":
        f"static_cast<{_C}& ({_C}::*)(at_npu::native::PROC_FUNC)>(&{_C}::SetCustomHandler)",
    f"{_C}::DynamicInputReg": f"static_cast<{_C}& ({_C}::*)(at_npu::native::DynamicInputRegFunc, "
                              f"at_npu::native::DyNumAndIndex)>(&{_C}::DynamicInputReg)",
    f"{_C}::Expect": f"static_cast<{_C}& ({_C}::*)(at_npu::native::UnifiedResult)>(&{_C}::Expect)",
    f"{_C}::Input()": f"static_cast<{_C}& ({_C}::*)()>(&{_C}::Input)",
    f"{_C}::Input(const at::Tensor &input, const string &descName = \"\", const c10::optional<aclFormat> "
    f"&sensitive_format = c10::nullopt, const string &realData = \"\")":
        f"static_cast<{_C}& ({_C}::*)(const at::Tensor&, const std::string&, {_OPT_FMT}, const std::string&)>"
        f"(&{_C}::Input)",
    f"{_C}::InputWithoutContiguous": f"static_cast<{_C}& ({_C}::*)(const at::Tensor&, const std::string&, "
                                     f"const std::string&)>(&{_C}::InputWithoutContiguous)",
    f"{_C}::Input(const c10::ArrayRef<T> &dimListRef, at::IntArrayRef realShape, at::ScalarType toType, "
    f"CompileType compileType = CompileType::MEMORY_HOST_COMPILE_DEPENDENT, const string& realDtype = \"\", "
    f"const string& descName = \"\")":
        f"static_cast<{_C}& ({_C}::*)(const c10::ArrayRef<float>&, at::IntArrayRef, at::ScalarType, "
        f"at_npu::native::CompileType, const std::string&, const std::string&)>(&{_C}::Input<float>)",
    f"{_C}::Input(const c10::IntArrayRef &dimListRef, at::ScalarType toType = at::kLong, CompileType compileType = "
    f"CompileType::MEMORY_HOST_COMPILE_DEPENDENT, const string& realDtype = \"\", const string& descName = \"\")":
        f"static_cast<{_C}& ({_C}::*)(const c10::IntArrayRef&, at::ScalarType, at_npu::native::CompileType, "
        f"const std::string&, const std::string&)>(&{_C}::Input)",
    f"{_C}::Input(const c10::ArrayRef<double> &dimListRef, at::IntArrayRef realShape, at::ScalarType toType = "
    f"at::kDouble, CompileType compileType = CompileType::MEMORY_HOST_COMPILE_DEPENDENT, const string& realDtype = "
    f"\"\")":
        f"static_cast<{_C}& ({_C}::*)(const c10::ArrayRef<double>&, at::IntArrayRef, at::ScalarType, "
        f"at_npu::native::CompileType, const std::string&)>(&{_C}::Input)",
    f"{_C}::Input(const c10::Scalar &input, const at::ScalarType type, CompileType compileType = "
    f"CompileType::MEMORY_HOST_COMPILE_INDEPENDENT)":
        f"static_cast<{_C}& ({_C}::*)(const c10::Scalar&, const at::ScalarType, at_npu::native::CompileType)>"
        f"(&{_C}::Input)",
    f"{_C}::Inputs": f"static_cast<{_C}& ({_C}::*)(const at::TensorList&)>(&{_C}::Inputs)",
    f"{_C}::InputScalarToNPUTensor":
        f"static_cast<{_C}& ({_C}::*)(const c10::Scalar&, const at::ScalarType)>(&{_C}::InputScalarToNPUTensor)",
    f"{_C}::Output": f"static_cast<{_C}& ({_C}::*)(at::Tensor&, const std::string&, {_OPT_FMT}, "
                     f"const std::string&)>(&{_C}::Output)",
    f"{_C}::Attr(const string &name, dataType value)":
        f"static_cast<{_C}& ({_C}::*)(const std::string&, int64_t)>(&{_C}::Attr<int64_t>)",
    f"{_C}::Attr(const string &name, dataType value, bool cond)":
        f"static_cast<{_C}& ({_C}::*)(const std::string&, int64_t, bool)>(&{_C}::Attr<int64_t>)",
    f"{_C}::Run": f"static_cast<void ({_C}::*)()>(&{_C}::Run)",
    f"{_C}::Sync(c10::SmallVector<int64_t, N> &sync_index)":
        f"static_cast<{_C}& ({_C}::*)(c10::SmallVector<int64_t, 8>&)>(&{_C}::Sync<8>)",
    f"{_C}::Sync()": f"static_cast<{_C}& ({_C}::*)()>(&{_C}::Sync)",
    "c10_npu::NPUHooksInterface::getDefaultGenerator":
        "static_cast<const at::Generator& (c10_npu::NPUHooksInterface::*)(c10::DeviceIndex) const>"
        "(&c10_npu::NPUHooksInterface::getDefaultGenerator)",
    "c10_npu::device_count": "static_cast<c10::DeviceIndex (*)()>(&c10_npu::device_count)",
    "c10_npu::GetDevice": "static_cast<aclError (*)(int32_t*)>(&c10_npu::GetDevice)",
    "c10_npu::SetDevice": "static_cast<aclError (*)(c10::DeviceIndex)>(&c10_npu::SetDevice)",
    "c10_npu::current_device()": "static_cast<c10::DeviceIndex (*)()>(&c10_npu::current_device)",
    "c10_npu::set_device": "static_cast<void (*)(c10::DeviceIndex)>(&c10_npu::set_device)",
    "c10_npu::warning_state": "static_cast<c10_npu::WarningState& (*)()>(&c10_npu::warning_state)",
    "c10_npu::warn_or_error_on_sync": "static_cast<void (*)()>(&c10_npu::warn_or_error_on_sync)",
    "at_npu::native::get_npu_format": "static_cast<int64_t (*)(const at::Tensor&)>(&at_npu::native::get_npu_format)",
    "at_npu::native::get_npu_storage_sizes":
        "static_cast<std::vector<int64_t> (*)(const at::Tensor&)>(&at_npu::native::get_npu_storage_sizes)",
    "at_npu::native::npu_format_cast":
        "static_cast<at::Tensor (*)(const at::Tensor&, int64_t)>(&at_npu::native::npu_format_cast)",
    "at_npu::native::empty_with_format": "static_cast<at::Tensor (*)(c10::IntArrayRef, const c10::TensorOptions&, "
                                         "int64_t, bool)>(&at_npu::native::empty_with_format)",
    "at_npu::native::empty_with_swapped_memory":
        "static_cast<at::Tensor (*)(c10::IntArrayRef, c10::optional<at::ScalarType>, c10::optional<c10::Device>)>"
        "(&at_npu::native::empty_with_swapped_memory)",
    "c10_npu::c10_npu_get_error_message": "static_cast<char* (*)()>(&c10_npu::c10_npu_get_error_message)",
    "npu_dropout_gen_mask": "static_cast<at::Tensor (*)(const at::Tensor&, at::IntArrayRef, double, int64_t, int64_t, "
                            "c10::optional<bool>, c10::optional<bool>)>(&at_npu::native::npu_dropout_gen_mask)",
    f"{_SG}::current_device": f"static_cast<c10::Device ({_SG}::*)() const>(&{_SG}::current_device)",
    f"{_SG}::current_stream": f"static_cast<{_S} ({_SG}::*)() const>(&{_SG}::current_stream)",
    f"{_SG}::NPUStreamGuard": f"std::is_constructible_v<{_SG}, c10::Stream>",
    f"{_SG}::original_device": f"static_cast<c10::Device ({_SG}::*)() const>(&{_SG}::original_device)",
    f"{_SG}::original_stream": f"static_cast<{_S} ({_SG}::*)() const>(&{_SG}::original_stream)",
    f"{_SG}::reset_stream": f"static_cast<void ({_SG}::*)(c10::Stream)>(&{_SG}::reset_stream)",
    "stream_synchronize": "static_cast<void (*)(aclrtStream)>(&c10_npu::stream_synchronize)",
    "batch_isend_irecv": "static_cast<c10::intrusive_ptr<c10d::Work> (c10d_npu::ProcessGroupHCCL::*)("
                         "std::vector<std::string>&, std::vector<at::Tensor>&, std::vector<int64_t>)>"
                         "(&c10d_npu::ProcessGroupHCCL::batch_isend_irecv)",
}

EXTENSION_SOURCE = r"""
#include <torch/extension.h>

#include <type_traits>

#include "torch_npu/csrc/aten/NPUGeneratorImpl.h"
#include "torch_npu/csrc/core/npu/NPUCachingAllocator.h"
#include "torch_npu/csrc/core/npu/NPUEvent.h"
#include "torch_npu/csrc/core/npu/NPUException.h"
#include "torch_npu/csrc/core/npu/NPUFormat.h"
#include "torch_npu/csrc/core/npu/NPUFunctions.h"
#include "torch_npu/csrc/core/npu/NPUGuard.h"
#include "torch_npu/csrc/core/npu/NPUHooksInterface.h"
#include "torch_npu/csrc/core/npu/NPUStream.h"
#include "torch_npu/csrc/distributed/ProcessGroupHCCL.hpp"
#include "torch_npu/csrc/framework/OpCommand.h"
#include "torch_npu/csrc/libs/init_npu.h"
#include "third_party/op-plugin/op_plugin/include/ops.h"

// A kernel written the way Ascend operators are: an OpCommand launched on the current
// stream, whose handler computes over the tensors' device memory.
at::Tensor scaled_add_npu(const at::Tensor& x, const at::Tensor& y, double alpha) {
  TORCH_CHECK(x.sizes() == y.sizes() && x.scalar_type() == at::kFloat && y.scalar_type() == at::kFloat,
              "scaled_add: x and y must be float tensors of one shape");
  at::Tensor xc = x.contiguous();
  at::Tensor yc = y.contiguous();
  at::Tensor out = at::empty_like(xc);
  const float a = static_cast<float>(alpha);
  at_npu::native::OpCommand cmd;
  cmd.Name("ScaledAdd").Input(xc).Input(yc).Output(out).Attr("alpha", a)
      .SetCustomHandler([xc, yc, out, a]() -> int {
        const float* px = xc.data_ptr<float>();
        const float* py = yc.data_ptr<float>();
        float* po = out.data_ptr<float>();
        for (int64_t i = 0; i < out.numel(); ++i) {
          const float scaled = py[i] * a;
          po[i] = px[i] + scaled;
        }
        return 0;
      })
      .Run();
  return out;
}

at::Tensor scaled_add_meta(const at::Tensor& x, const at::Tensor& y, double alpha) {
  TORCH_CHECK(x.sizes() == y.sizes(), "scaled_add: x and y must have one shape");
  return at::empty_like(x, x.options().memory_format(at::MemoryFormat::Contiguous));
}

TORCH_LIBRARY(npu_cpp_api_test, m) { m.def("scaled_add(Tensor x, Tensor y, float alpha) -> Tensor"); }
TORCH_LIBRARY_IMPL(npu_cpp_api_test, PrivateUse1, m) { m.impl("scaled_add", &scaled_add_npu); }
TORCH_LIBRARY_IMPL(npu_cpp_api_test, Meta, m) { m.impl("scaled_add", &scaled_add_meta); }

std::vector<int64_t> current_stream(int64_t device) {
  c10_npu::NPUStream s = c10_npu::getCurrentNPUStream(static_cast<c10::DeviceIndex>(device));
  return {s.device_index(), s.id()};
}

int64_t set_current_stream_from_pool(int64_t device) {
  c10_npu::NPUStream s = c10_npu::getNPUStreamFromPool(static_cast<c10::DeviceIndex>(device));
  c10_npu::setCurrentNPUStream(s);
  c10_npu::stream_synchronize(s.stream());  // the handle maps back to the stream
  return s.id();
}

int64_t raw_alloc(int64_t nbytes) {
  return reinterpret_cast<int64_t>(c10_npu::NPUCachingAllocator::raw_alloc(static_cast<size_t>(nbytes)));
}

void raw_delete(int64_t ptr) { c10_npu::NPUCachingAllocator::raw_delete(reinterpret_cast<void*>(ptr)); }

int64_t allocated_bytes(int64_t device) {
  auto stats = c10_npu::NPUCachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].current;
}

double timed_event_pair() {
  c10_npu::NPUEvent start(ACL_EVENT_TIME_LINE), end(ACL_EVENT_TIME_LINE);
  start.record();
  end.record(c10_npu::getCurrentNPUStream());
  end.synchronize();
  TORCH_CHECK(start.isCreated() && end.query(), "recorded events must be created and complete");
  return start.elapsed_time(end);
}

uint64_t default_generator_seed(int64_t device) {
  auto& gen = at_npu::detail::getDefaultNPUGenerator(static_cast<c10::DeviceIndex>(device));
  return gen.current_seed();
}

void seed_default_generator(int64_t device, int64_t seed) {
  at::Generator gen = at_npu::detail::getDefaultNPUGenerator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.get<at_npu::NPUGeneratorImpl>()->set_current_seed(static_cast<uint64_t>(seed));
}

// What a custom kernel that draws its own numbers does first: reserve `increment` values of
// the default generator's stream (the generator's lock held, as CUDA's kernels hold it).
std::vector<int64_t> reserve_philox(int64_t device, int64_t increment) {
  at::Generator gen = at_npu::detail::getDefaultNPUGenerator(static_cast<c10::DeviceIndex>(device));
  std::lock_guard<std::mutex> lock(gen.mutex());
  at_npu::PhiloxNpuState state = gen.get<at_npu::NPUGeneratorImpl>()->philox_npu_state(static_cast<uint64_t>(increment));
  return {static_cast<int64_t>(state.seed_), static_cast<int64_t>(state.offset_)};
}

int64_t sync_debug_mode() { return static_cast<int64_t>(c10_npu::warning_state().get_sync_debug_mode()); }

std::vector<int64_t> formats_of_empty_and_cast(int64_t acl_format) {
  at::Tensor t = at_npu::native::empty_with_format({2, 3}, at::TensorOptions().device(c10::Device("npu:0")),
                                                   acl_format);
  at::Tensor nd = at_npu::native::npu_format_cast(t, ACL_FORMAT_ND);
  return {at_npu::native::get_npu_format(t), at_npu::native::get_npu_format(nd),
          at_npu::native::get_npu_storage_sizes(t)[1]};
}

at::Tensor dropout_mask(const at::Tensor& self, std::vector<int64_t> size, double p, int64_t seed, int64_t offset) {
  return at_npu::native::npu_dropout_gen_mask(self, size, p, seed, offset, c10::nullopt, c10::nullopt);
}

void run_command_without_handler() { at_npu::native::OpCommand().Name("Add").Run(); }

std::string set_device_error(int64_t device) {
  aclError status = c10_npu::SetDevice(static_cast<c10::DeviceIndex>(device));
  return status == ACL_SUCCESS ? std::string() : std::string(c10_npu::c10_npu_get_error_message());
}

// Keeps a value alive in memory, so a function address is a real reference to its symbol.
template <typename T>
void keep(const T& value) {
  asm volatile("" : : "g"(&value) : "memory");
}

int64_t checked_public_api_names() {
  int64_t checked = 0;
@CHECKS@
  return checked;
}
"""

EXTENSION_FUNCTIONS = [
    "current_stream", "set_current_stream_from_pool", "raw_alloc", "raw_delete", "allocated_bytes",
    "timed_event_pair", "default_generator_seed", "seed_default_generator", "reserve_philox", "sync_debug_mode",
    "formats_of_empty_and_cast", "dropout_mask", "run_command_without_handler", "set_device_error", "checked_public_api_names",
]


def _listed_cpp_names():
    with open(API_LISTING, newline="") as listing:
        rows = [row for row in csv.reader(listing, delimiter="\t") if row and not row[0].startswith("#")]
    return [name for kind, name, *_ in rows if kind == "cpp"]


def _checks_source():
    lines = []
    for name, check in NAME_CHECKS.items():
        if check.startswith("std::is_"):
            lines.append(f"  static_assert({check}, {json.dumps(name)});")
        else:
            lines.append(f"  keep({check});")
        lines.append("  ++checked;")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def ext(tmp_path_factory):
    from torch.utils.cpp_extension import load_inline

    (library_dir,) = library_paths()
    source = EXTENSION_SOURCE.replace("@CHECKS@", _checks_source())
    return load_inline(
        name="npu_cpp_api_test",
        cpp_sources=[source],
        functions=EXTENSION_FUNCTIONS,
        extra_include_paths=include_paths(),
        extra_cflags=["-O1", "-g0"],
        extra_ldflags=[f"-L{library_dir}", "-ltorch_npu", f"-Wl,-rpath,{library_dir}"],
        build_directory=str(tmp_path_factory.mktemp("npu_cpp_api_test")),
        verbose=False,
    )


def test_every_listed_cpp_name_is_declared_and_exported(ext):
    listed = _listed_cpp_names()
    assert len(listed) == len(set(listed))
    assert set(NAME_CHECKS) == set(listed)
    # The extension compiled each check and loaded (every referenced symbol resolved).
    assert ext.checked_public_api_names() == len(NAME_CHECKS)


def test_extension_and_torch_npu_share_one_loaded_runtime(ext):
    with open("/proc/self/maps") as maps:
        runtimes = {line.split()[-1] for line in maps if line.rstrip().endswith("libtorch_npu.so")}
    assert len(runtimes) == 1, runtimes
    assert os.path.realpath(next(iter(runtimes))) == os.path.realpath(
        os.path.join(library_paths()[0], "libtorch_npu.so"))


def test_current_stream_is_the_runtime_stream(ext):
    assert ext.current_stream(-1) == [0, torch.npu.current_stream().stream_id]
    side = torch.npu.Stream()
    with torch.npu.stream(side):
        assert ext.current_stream(0) == [0, side.stream_id]
    pool_id = ext.set_current_stream_from_pool(0)
    assert torch.npu.current_stream().stream_id == pool_id != 0


def test_caching_allocator_allocation_counts_in_memory_allocated(ext):
    torch.npu.synchronize()
    before = torch.npu.memory_allocated(0)
    assert ext.allocated_bytes(0) == before
    ptr = ext.raw_alloc(1 << 20)
    try:
        assert torch.npu.memory_allocated(0) == before + (1 << 20)
        assert ext.allocated_bytes(0) == before + (1 << 20)
    finally:
        ext.raw_delete(ptr)
    assert torch.npu.memory_allocated(0) == before
    with pytest.raises(RuntimeError, match="not the start of a live npu allocation"):
        ext.raw_delete(ptr)


def _inputs(seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(257, generator=gen), torch.randn(257, generator=gen)


def test_custom_op_eager_equals_cpu(ext):
    x, y = _inputs(0)
    out = torch.ops.npu_cpp_api_test.scaled_add(x.npu(), y.npu(), 0.75)
    assert out.device.type == "npu"
    torch.testing.assert_close(out.cpu(), x + y * 0.75, rtol=0, atol=0)
    # A non-contiguous input goes through .contiguous() on the npu first.
    xt = torch.randn(16, 8, generator=torch.Generator().manual_seed(1)).t()
    out_t = torch.ops.npu_cpp_api_test.scaled_add(xt.npu(), xt.npu(), 2.0)
    torch.testing.assert_close(out_t.cpu(), xt + xt * 2.0, rtol=0, atol=0)


def test_custom_op_under_torch_compile_is_one_opaque_call(ext):
    graphs = []

    def recording_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(x, y):
        return torch.ops.npu_cpp_api_test.scaled_add(x * 2, y, 0.5) + 1

    x, y = _inputs(2)
    expected = (x * 2 + y * 0.5) + 1
    out = torch.compile(f, backend=recording_backend, fullgraph=True)(x.npu(), y.npu())
    torch.testing.assert_close(out.cpu(), expected, rtol=0, atol=0)
    (gm,) = graphs
    scaled_add = torch.ops.npu_cpp_api_test.scaled_add
    calls = [n for n in gm.graph.nodes if n.target in (scaled_add, scaled_add.default)]
    assert len(calls) == 1
    out_aot = torch.compile(f, backend="aot_eager", fullgraph=True)(x.npu(), y.npu())
    torch.testing.assert_close(out_aot.cpu(), expected, rtol=0, atol=0)


def test_custom_op_in_npu_graph_replays_on_new_data(ext):
    x, y = (t.npu() for t in _inputs(3))
    torch.ops.npu_cpp_api_test.scaled_add(x, y, 1.5)  # warm-up outside the capture
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        out = torch.ops.npu_cpp_api_test.scaled_add(x, y, 1.5)
    new_x, new_y = _inputs(4)
    x.copy_(new_x)
    y.copy_(new_y)
    graph.replay()
    torch.testing.assert_close(out.cpu(), new_x + new_y * 1.5, rtol=0, atol=0)


def test_events_generators_and_sync_mode_are_the_runtime_ones(ext):
    assert ext.timed_event_pair() >= 0.0
    torch.npu.manual_seed(1234)
    assert ext.default_generator_seed(0) == 1234
    ext.seed_default_generator(0, 99)
    assert torch.npu.initial_seed() == 99
    previous = torch.npu.get_sync_debug_mode()
    try:
        torch.npu.set_sync_debug_mode("warn")
        assert ext.sync_debug_mode() == 1
    finally:
        torch.npu.set_sync_debug_mode(previous)


def test_kernels_reserve_philox_values_in_eager_and_during_capture(ext):
    # As CUDA's philox_cuda_state: a kernel may reserve values while its call is captured
    # (reading or seeding the state from the host may not); the offset advances by the
    # reservation rounded up to 4, and a replay runs the kernel again at the offset of then.
    torch.npu.manual_seed(5)
    assert ext.reserve_philox(0, 10) == [5, 0]
    assert ext.reserve_philox(0, 1) == [5, 12]
    graph = torch.npu.NPUGraph()
    with torch.npu.graph(graph):
        during_capture = ext.reserve_philox(0, 4)
    assert during_capture == [5, 16]
    offset = torch.npu.get_rng_state()[8:].view(torch.int64).item()
    assert offset == 20


def test_formats_and_dropout_masks(ext):
    assert ext.formats_of_empty_and_cast(29) == [29, 2, 3]
    like = torch.empty(1, device="npu")
    mask = ext.dropout_mask(like, [10, 30], 0.3, 7, 4)
    assert mask.device.type == "npu" and mask.dtype == torch.uint8 and mask.shape == (384 // 8,)
    assert torch.equal(mask.cpu(), ext.dropout_mask(like, [10, 30], 0.3, 7, 4).cpu())
    assert not torch.equal(mask.cpu(), ext.dropout_mask(like, [10, 30], 0.3, 7, 8).cpu())
    kept = torch.tensor([bin(b).count("1") for b in mask.cpu().tolist()]).sum().item()
    assert 0.6 * 384 < kept < 0.8 * 384
    assert torch.all(ext.dropout_mask(like, [5], 0.0, 1, 0).cpu() == 255)
    assert torch.all(ext.dropout_mask(like, [5], 1.0, 1, 0).cpu() == 0)


def test_errors_name_the_problem(ext):
    with pytest.raises(RuntimeError, match="OpCommand Add: .*SetCustomHandler"):
        ext.run_command_without_handler()
    message = ext.set_device_error(torch.npu.device_count())
    assert "device" in message.lower() and str(torch.npu.device_count()) in message
