// Turn runtime values into compile-time constants (flash-attention's static_switch.h
// idea). Every switch over an enumerated choice ends in an `else` that returns an
// error Status naming the value, so an unhandled value can never fall through.
// The lambda bodies must return ffpa::Status.
#pragma once

#include <string>

#include "ffpa/api.h"

// IMPL must already be resolved (kAuto replaced by a kernel).
#define FFPA_IMPL_SWITCH(IMPL, CONST_NAME, ...)                                         \
  [&]() -> ::ffpa::Status {                                                             \
    if ((IMPL) == ::ffpa::Impl::kMma) {                                                 \
      constexpr ::ffpa::Impl CONST_NAME = ::ffpa::Impl::kMma;                           \
      return __VA_ARGS__();                                                             \
    } else if ((IMPL) == ::ffpa::Impl::kTma) {                                          \
      constexpr ::ffpa::Impl CONST_NAME = ::ffpa::Impl::kTma;                           \
      return __VA_ARGS__();                                                             \
    } else if ((IMPL) == ::ffpa::Impl::kSimt) {                                         \
      constexpr ::ffpa::Impl CONST_NAME = ::ffpa::Impl::kSimt;                          \
      return __VA_ARGS__();                                                             \
    } else if ((IMPL) == ::ffpa::Impl::kCute) {                                         \
      constexpr ::ffpa::Impl CONST_NAME = ::ffpa::Impl::kCute;                          \
      return __VA_ARGS__();                                                             \
    } else if ((IMPL) == ::ffpa::Impl::kCuteTma) {                                      \
      constexpr ::ffpa::Impl CONST_NAME = ::ffpa::Impl::kCuteTma;                       \
      return __VA_ARGS__();                                                             \
    } else {                                                                            \
      return ::ffpa::Status{::ffpa::ErrorKind::kImpl,                                   \
                            "internal: unresolved impl " + std::to_string(int(IMPL)) +  \
                                " reached the kernel switch (expected mma, tma, simt, cute or cute_tma)"}; \
    }                                                                                   \
  }()

// ACCUM as a compile-time bool (kFp16 -> true).
#define FFPA_ACCUM_SWITCH(ACCUM, CONST_NAME, ...)                                       \
  [&]() -> ::ffpa::Status {                                                             \
    if ((ACCUM) == ::ffpa::Accum::kFp16) {                                              \
      constexpr bool CONST_NAME = true;                                                 \
      return __VA_ARGS__();                                                             \
    } else if ((ACCUM) == ::ffpa::Accum::kFp32) {                                       \
      constexpr bool CONST_NAME = false;                                                \
      return __VA_ARGS__();                                                             \
    } else {                                                                            \
      return ::ffpa::Status{::ffpa::ErrorKind::kImpl,                                   \
                            "internal: unknown accum " + std::to_string(int(ACCUM)) +   \
                                " reached the kernel switch (expected fp32 or fp16)"};  \
    }                                                                                   \
  }()
