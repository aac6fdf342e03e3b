// Turn runtime values into compile-time constants (flash-attention's static_switch.h
// idea). Every switch over an enumerated choice ends in an `else` that returns an
// error Status naming the value, so an unhandled value can never fall through.
// The lambda bodies must return ffpa::Status.
#pragma once

#include <string>

#include "ffpa/api.h"

// IMPL must already be resolved (kAuto replaced by kMma or kSimt).
#define FFPA_IMPL_SWITCH(IMPL, CONST_NAME, ...)                                         \
  [&]() -> ::ffpa::Status {                                                             \
    if ((IMPL) == ::ffpa::Impl::kMma) {                                                 \
      constexpr ::ffpa::Impl CONST_NAME = ::ffpa::Impl::kMma;                           \
      return __VA_ARGS__();                                                             \
    } else if ((IMPL) == ::ffpa::Impl::kSimt) {                                         \
      constexpr ::ffpa::Impl CONST_NAME = ::ffpa::Impl::kSimt;                          \
      return __VA_ARGS__();                                                             \
    } else {                                                                            \
      return ::ffpa::Status{::ffpa::ErrorKind::kImpl,                                   \
                            "internal: unresolved impl " + std::to_string(int(IMPL)) +  \
                                " reached the kernel switch (expected mma or simt)"};   \
    }                                                                                   \
  }()
