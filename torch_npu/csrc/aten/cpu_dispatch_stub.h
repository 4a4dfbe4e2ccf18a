// ATen's DispatchStub.h as libtorch was built with it, for calling a stub's CPU kernel.
//
// DispatchStub's CPU kernel table (its members and the parameters of its look-up) depends
// on the CPU capabilities torch was built for: on x86-64 torch builds AVX2 and AVX512
// kernels. Included with other capabilities, a stub call refers to a DispatchStubImpl
// symbol libtorch does not have, and the extension fails to load. Include this header
// first, before anything that includes DispatchStub.h.
#pragma once

#if defined(__x86_64__) || defined(_M_X64)
#ifndef HAVE_AVX512_CPU_DEFINITION
#define HAVE_AVX512_CPU_DEFINITION
#endif
#ifndef HAVE_AVX2_CPU_DEFINITION
#define HAVE_AVX2_CPU_DEFINITION
#endif
#endif
#include <ATen/native/DispatchStub.h>
