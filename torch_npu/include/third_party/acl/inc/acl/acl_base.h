// The ACL (Ascend Computing Language) types that torch_npu's public C++ API names.
//
// The simulated NPU has no ACL library: these are the handle, error and format types
// only, so that code written against torch_npu's headers compiles unchanged. Handles
// are opaque; the runtime gives them meaning (torch_npu/csrc/public_api).
#pragma once

#include <cstdint>

typedef int aclError;
typedef void* aclrtStream;
typedef void* aclrtEvent;

#define ACL_SUCCESS 0
#define ACL_ERROR_INVALID_PARAM 100000
#define ACL_ERROR_RT_FEATURE_NOT_SUPPORT 207000

// Event creation flags (aclrtCreateEventWithFlag). ACL_EVENT_TIME_LINE makes an event
// usable for elapsed_time.
#define ACL_EVENT_DEFAULT 0x00000000u
#define ACL_EVENT_SYNC 0x00000001u
#define ACL_EVENT_CAPTURE_STREAM_PROGRESS 0x00000002u
#define ACL_EVENT_TIME_LINE 0x00000008u

// A handle another process opens to wait on an event.
#define ACL_IPC_EVENT_HANDLE_SIZE 64
typedef struct aclrtIpcEventHandle {
  char reserved[ACL_IPC_EVENT_HANDLE_SIZE];
} aclrtIpcEventHandle;

// Storage formats of NPU tensors (torch_npu.npu_format_cast's acl_format values).
typedef enum {
  ACL_FORMAT_UNDEFINED = -1,
  ACL_FORMAT_NCHW = 0,
  ACL_FORMAT_NHWC = 1,
  ACL_FORMAT_ND = 2,
  ACL_FORMAT_NC1HWC0 = 3,
  ACL_FORMAT_FRACTAL_Z = 4,
  ACL_FORMAT_NC1HWC0_C04 = 12,
  ACL_FORMAT_HWCN = 16,
  ACL_FORMAT_NDHWC = 27,
  ACL_FORMAT_FRACTAL_NZ = 29,
  ACL_FORMAT_NCDHW = 30,
  ACL_FORMAT_NDC1HWC0 = 32,
  ACL_FRACTAL_Z_3D = 33,
} aclFormat;
