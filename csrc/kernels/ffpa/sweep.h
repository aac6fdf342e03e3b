// The tuning sweep's registry (FFPA_SWEEP=ON builds only; cmake/FfpaSweep.cmake generates
// the variants and this registry): each entry is one forward kernel compiled with a
// configuration other than the default, launched on FwdParams like the default's
// launchers. ffpa_device_check --sweep-csv times them against the default
// (docs/perf.md "Tuning sweep").
#pragma once

#include <string>

#include "ffpa/api.h"
#include "ffpa/params.h"

namespace ffpa::sweep {

struct Variant {
  const char* path;    // the impl it is a variant of: mma, tma, cute, cute_tma
  int head_dim;
  const char* config;  // "Br=.. Bc=.. Bd=.. (persist-D|split-D) warps=MxD stages=S [box=..]"
  Status (*launch)(const FwdParams& params);  // fp16 inputs, fp32 accumulation
};

FFPA_API int count();
FFPA_API const Variant* get(int i);
// The configuration the release instances of (path, head dim) compile, in Variant::config's
// words (from cute/config.h and kernel_traits.h).
FFPA_API std::string default_config(const std::string& path, int head_dim);

}  // namespace ffpa::sweep
