// The accuracy each path is held to, in one place: the device check, the CPU emulator and
// the tests read this table, and the binding exports it (build_info()["tolerances"]) to
// the package's tests, its bench and the notebooks. docs/install.md states the same numbers
// and the measurements behind the low-precision ones; a change here is a change of what
// the project promises.
#pragma once

namespace ffpa {

struct Tolerance {
  const char* name;  // the path: "fp16", "bf16", "fp16_acc" (fp16 accumulation), "fp8", "fp4",
                     // "bwd_fp16", "bwd_bf16" (the backward's gradients)
  // Against the fp32 / fp64 reference on the same inputs:
  float rtol;  // |out - ref| <= atol + rtol * |ref| elementwise (the 16-bit paths)
  float atol;
  float lse;  // |lse - ref|, natural log, elementwise
  // The low-precision paths (0 where unused): over the whole output,
  float min_cos;     // cosine similarity of out with ref, at least
  float max_rel_l1;  // sum |out - ref| / sum |ref|, at most
  // |gain - 1| at most, gain = sum out * ref / sum ref^2: the least-squares scale of out
  // against ref. Rounding noise leaves it at 1; a biased rounding or a wrong scale
  // factor moves all of out together, which cos does not see.
  float max_gain_err;
};

inline constexpr Tolerance kTolerances[] = {
    {"fp16", 1e-2f, 2e-2f, 2e-2f, 0.f, 0.f, 0.f},
    {"bf16", 3e-2f, 5e-2f, 5e-2f, 0.f, 0.f, 0.f},
    // fp16 accumulation (fp16 inputs): S and P V summed in fp16 per block.
    {"fp16_acc", 3e-2f, 5e-2f, 5e-2f, 0.f, 0.f, 0.f},
    // FP8 (e4m3 Q K^T and P V, SageAttention's smoothing and scales) and NVFP4 (Q K^T in
    // e2m1 with ue4m3 scales per 16 values, P V in e4m3): bounds over the CPU emulator's
    // measurements (docs/install.md, "Low-precision paths": FP8 cos 0.9985-0.9994, rel L1
    // 0.037-0.053, max abs <= 0.16 on unit-variance inputs with and without K outlier
    // channels, every release head dim; NVFP4 cos 0.989-0.995, rel L1 0.09-0.145, max abs
    // <= 0.52; the gain within 0.9919-1.0045 (FP8) and 0.95-1.005 (NVFP4, whose small
    // problems are noisy)), with room for other seeds. atol bounds the largest single error.
    {"fp8", 0.f, 2.5e-1f, 1e-1f, 0.998f, 6e-2f, 1.5e-2f},
    {"fp4", 0.f, 7.5e-1f, 3e-1f, 0.985f, 1.7e-1f, 8e-2f},
    // The backward kernels' gradients (dQ, dK, dV each) against float64 on the same inputs
    // and the same O and LSE: atol bounds max |g - ref| / max |ref|, max_rel_l1 bounds
    // sum |g - ref| / sum |ref|. Each is 1.5x torch's own fused backward's worst error plus
    // a floor (2e-4 / 1e-4 fp16, 1e-3 / 5e-4 bf16), measured on torch's CPU fused (flash)
    // backward as a proxy (torch 2.15, unit-variance inputs): D = 64..512, Nq = 83, Nkv =
    // 141, both causal settings, default scale: fp16 max 8.9e-4, L1 3.6e-4; bf16 max 7.1e-3,
    // L1 2.8e-3; and the peaked softmax of a custom scale 0.3 at D = 64 / 320, Nq = 19, Nkv
    // = 23 (four seeds), the worst: fp16 max 1.23e-3, L1 1.02e-3; bf16 max 1.11e-2, L1
    // 9.27e-3. The CPU emulator measured fp16 max <= 9.8e-4, L1 <= 7.5e-4 (the custom-scale
    // case; <= 4e-4 at the default scale) and bf16 max <= 4.2e-3, L1 <= 2.3e-3
    // (csrc/tests/emulate_bwd.cpp).
    {"bwd_fp16", 0.f, 2e-3f, 0.f, 0.f, 1.6e-3f, 0.f},
    {"bwd_bf16", 0.f, 1.8e-2f, 0.f, 0.f, 1.44e-2f, 0.f},
};

// The row named `name`, or nullptr when the table has none (a check that a row exists).
constexpr const Tolerance* find_tolerance(const char* name) {
  for (const Tolerance& t : kTolerances) {
    const char* a = t.name;
    const char* b = name;
    while (*a != 0 && *a == *b) ++a, ++b;
    if (*a == *b) return &t;
  }
  return nullptr;
}

// The row named `name`; the first row for a name the table does not know.
constexpr const Tolerance& tolerance(const char* name) {
  const Tolerance* t = find_tolerance(name);
  return t != nullptr ? *t : kTolerances[0];
}

}  // namespace ffpa
