// The device-check runner's kernel timings: see device_check.h.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "device_check.h"

namespace ffpa::check {

namespace {

// ---- bench: the kernels' own timings (CUDA events), for the SDPA comparison made by
// a separate Python process on the same shapes (ctest/gpu/sdpa_bench.py) ----------------

__global__ void fill_random(uint16_t* p, int64_t n, uint32_t seed, bool bf16) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    x ^= x >> 15, x *= 2246822519u, x ^= x >> 13;
    const float u = (x & 0xffffff) / float(0x1000000) * 2.f - 1.f;  // uniform [-1, 1)
    if (bf16) {
      __nv_bfloat16 h = __float2bfloat16_rn(u);
      p[i] = *reinterpret_cast<uint16_t*>(&h);
    } else {
      __half h = __float2half_rn(u);
      p[i] = *reinterpret_cast<uint16_t*>(&h);
    }
  }
}

}  // namespace

int run_bench(const BenchOpts& o, const ffpa::BuildInfo& info, const BenchPaths& bp, bool dry_run) {
  std::vector<int> dims;
  for (int d : o.dims.empty() ? info.head_dims : o.dims)
    if (std::find(info.head_dims.begin(), info.head_dims.end(), d) != info.head_dims.end()) dims.push_back(d);
  struct Path {
    ffpa::Impl impl;
    ffpa::Accum accum;
  };
  std::vector<Path> paths = {{ffpa::Impl::kMma, ffpa::Accum::kFp32}};
  if (bp.tma) paths.push_back({ffpa::Impl::kTma, ffpa::Accum::kFp32});
  if (bp.f16acc && bp.mma_f16acc) paths.push_back({ffpa::Impl::kMma, ffpa::Accum::kFp16});
  if (bp.f16acc && bp.tma) paths.push_back({ffpa::Impl::kTma, ffpa::Accum::kFp16});
  if (bp.cute) paths.push_back({ffpa::Impl::kCute, ffpa::Accum::kFp32});
  if (bp.cute_tma) paths.push_back({ffpa::Impl::kCuteTma, ffpa::Accum::kFp32});
  if (bp.f16acc && bp.cute_tma) paths.push_back({ffpa::Impl::kCuteTma, ffpa::Accum::kFp16});
  // The low-precision rows, timed on the same tensors right after the 16-bit paths, so
  // that the summary's FP8 ratios to mma / tma / cute_tma and to SDPA compare one shape
  // in one run (ctest/gpu/summarize.py). On sm_90 they time nvcc 13.0's lowering of the
  // m16n8k32 e4m3 mma to two fp16 HMMA.16816 (cuobjdump of the sm_90 code): FP8's
  // correctness is checked there, its tensor-core speed is not (that needs sm_89 or the
  // sm_120 family, whose code has QMMA / OMMA).
  if (bp.cute_fp8) paths.push_back({ffpa::Impl::kCuteFp8, ffpa::Accum::kFp32});
  if (bp.cute_tma_fp8) paths.push_back({ffpa::Impl::kCuteTmaFp8, ffpa::Accum::kFp32});
  if (bp.cute_tma_fp4) paths.push_back({ffpa::Impl::kCuteTmaFp4, ffpa::Accum::kFp32});
  std::string csv = "source,D,dtype,causal,B,H,N,kernel,ms,tflops,accum\n";
  // The backward rows (kernel "bwd"): ffpa::backward() alone (the Delta pass, dK / dV and
  // the dQ pass) on the same tensors, fed by one forward's out and lse, where the build
  // has an fp16 backward instance of the head dim.
  const std::vector<std::string> bwd_instances = ffpa::backward_instances();
  int refused = 0;
  for (int d : dims)
    for (bool causal : {false, true}) {
      const double flop = 4.0 * o.h * double(o.n) * o.n * d / (causal ? 2 : 1);
      const bool bwd = std::find(bwd_instances.begin(), bwd_instances.end(), std::to_string(d) + ":fp16") !=
                       bwd_instances.end();
      if (dry_run) {
        for (const Path& p : paths)
          std::printf("bench plan: D=%d fp16 causal=%d impl=%s accum=%s B=1 H=%d N=%d warmup=%d iters=%d\n", d,
                      causal, ffpa::impl_name(p.impl), ffpa::accum_name(p.accum), o.h, o.n, o.warmup, o.iters);
        if (bwd)
          std::printf("bench plan: D=%d fp16 causal=%d backward B=1 H=%d N=%d warmup=%d iters=%d\n", d, causal, o.h,
                      o.n, o.warmup, std::max(1, o.iters / 2));
        continue;
      }
      const int64_t elems = int64_t(o.h) * o.n * d;
      uint16_t *q, *k, *v, *out;
      CHECK_CUDA(cudaMalloc(&q, elems * 2));
      CHECK_CUDA(cudaMalloc(&k, elems * 2));
      CHECK_CUDA(cudaMalloc(&v, elems * 2));
      CHECK_CUDA(cudaMalloc(&out, elems * 2));
      fill_random<<<1024, 256>>>(q, elems, 1u, false);
      fill_random<<<1024, 256>>>(k, elems, 2u, false);
      fill_random<<<1024, 256>>>(v, elems, 3u, false);
      CHECK_CUDA(cudaGetLastError());
      cudaEvent_t e0, e1;
      CHECK_CUDA(cudaEventCreate(&e0));
      CHECK_CUDA(cudaEventCreate(&e1));
      for (const Path& p : paths) {
        ffpa::ForwardArgs a;
        set_desc(a.q, q, false, 1, o.h, o.n, d, ffpa::DType::kFp16);
        set_desc(a.k, k, false, 1, o.h, o.n, d, ffpa::DType::kFp16);
        set_desc(a.v, v, false, 1, o.h, o.n, d, ffpa::DType::kFp16);
        set_desc(a.out, out, false, 1, o.h, o.n, d, ffpa::DType::kFp16);
        a.causal = causal;
        a.scale = 1.f / std::sqrt(float(d));
        a.impl = p.impl;
        a.accum = p.accum;
        ffpa::Impl used = ffpa::Impl::kAuto;
        a.impl_used = &used;
        bool ok = true;
        for (int i = 0; i < o.warmup + o.iters && ok; ++i) {
          if (i == o.warmup) CHECK_CUDA(cudaEventRecord(e0));
          const ffpa::Status st = ffpa::forward(a);
          if (!st.ok()) {
            std::fprintf(stderr, "bench D=%d causal=%d impl=%s accum=%s refused: %s\n", d, causal,
                         ffpa::impl_name(p.impl), ffpa::accum_name(p.accum), st.message.c_str());
            ok = false;
          }
        }
        if (!ok) {
          ++refused;
          CHECK_CUDA(cudaDeviceSynchronize());
          continue;
        }
        CHECK_CUDA(cudaEventRecord(e1));
        CHECK_CUDA(cudaEventSynchronize(e1));
        float ms = 0.f;
        CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        ms /= o.iters;
        const double tflops = flop / (ms * 1e-3) / 1e12;
        char line[256];
        std::snprintf(line, sizeof(line), "ffpa-cpp,%d,fp16,%d,1,%d,%d,%s,%.4f,%.2f,%s\n", d, causal ? 1 : 0, o.h,
                      o.n, ffpa::impl_name(used), ms, tflops, ffpa::accum_name(p.accum));
        std::printf("bench: %s", line);
        std::fflush(stdout);
        csv += line;
      }
      if (bwd) {
        // 2.5x the forward's FLOPs (dV, dP, dK, dQ and the recomputed S: five products of
        // the forward's two), the convention of flash-attention's and SDPA's benchmarks,
        // so that the rate compares with theirs; our dQ pass recomputes S and dP again (7
        // products), which the rate does not credit.
        uint16_t *dout, *dq, *dk, *dv;
        float *lse, *ws;
        CHECK_CUDA(cudaMalloc(&dout, elems * 2));
        CHECK_CUDA(cudaMalloc(&dq, elems * 2));
        CHECK_CUDA(cudaMalloc(&dk, elems * 2));
        CHECK_CUDA(cudaMalloc(&dv, elems * 2));
        CHECK_CUDA(cudaMalloc(&lse, int64_t(o.h) * o.n * 4));
        fill_random<<<1024, 256>>>(dout, elems, 4u, false);
        CHECK_CUDA(cudaGetLastError());
        ffpa::ForwardArgs f;
        set_desc(f.q, q, false, 1, o.h, o.n, d, ffpa::DType::kFp16);
        set_desc(f.k, k, false, 1, o.h, o.n, d, ffpa::DType::kFp16);
        set_desc(f.v, v, false, 1, o.h, o.n, d, ffpa::DType::kFp16);
        set_desc(f.out, out, false, 1, o.h, o.n, d, ffpa::DType::kFp16);
        f.lse.data = lse;
        f.lse.shape[0] = 1, f.lse.shape[1] = o.h, f.lse.shape[2] = o.n;
        f.lse.stride[0] = int64_t(o.h) * o.n, f.lse.stride[1] = o.n, f.lse.stride[2] = 1;
        f.causal = causal;
        f.scale = 1.f / std::sqrt(float(d));
        ffpa::BackwardArgs b;
        b.q = f.q, b.k = f.k, b.v = f.v, b.out = f.out, b.lse = f.lse;
        set_desc(b.dout, dout, false, 1, o.h, o.n, d, ffpa::DType::kFp16);
        set_desc(b.dq, dq, false, 1, o.h, o.n, d, ffpa::DType::kFp16);
        set_desc(b.dk, dk, false, 1, o.h, o.n, d, ffpa::DType::kFp16);
        set_desc(b.dv, dv, false, 1, o.h, o.n, d, ffpa::DType::kFp16);
        b.causal = causal;  // N = Nq = Nkv: both alignments are one mask
        b.scale = f.scale;
        CHECK_CUDA(cudaMalloc(&ws, std::max<int64_t>(ffpa::backward_workspace_floats(b), 1) * 4));
        b.workspace = ws;
        // Half the forward's iterations (at least one): a backward call is 2.5-3.5x a
        // forward's time, and the device check's budget holds both.
        const int iters = std::max(1, o.iters / 2);
        ffpa::Status st = ffpa::forward(f);
        for (int i = 0; i < o.warmup + iters && st.ok(); ++i) {
          if (i == o.warmup) CHECK_CUDA(cudaEventRecord(e0));
          st = ffpa::backward(b);
        }
        if (!st.ok()) {
          std::fprintf(stderr, "bench D=%d causal=%d backward refused: %s\n", d, causal, st.message.c_str());
          ++refused;
          CHECK_CUDA(cudaDeviceSynchronize());
        } else {
          CHECK_CUDA(cudaEventRecord(e1));
          CHECK_CUDA(cudaEventSynchronize(e1));
          float ms = 0.f;
          CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
          ms /= iters;
          char line[256];
          std::snprintf(line, sizeof(line), "ffpa-cpp,%d,fp16,%d,1,%d,%d,bwd,%.4f,%.2f,fp32\n", d, causal ? 1 : 0,
                        o.h, o.n, ms, 2.5 * flop / (ms * 1e-3) / 1e12);
          std::printf("bench: %s", line);
          std::fflush(stdout);
          csv += line;
        }
        cudaFree(dout), cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(lse), cudaFree(ws);
      }
      cudaEventDestroy(e0), cudaEventDestroy(e1);
      cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(out);
    }
  // A dry run writes the header alone: the rehearsal checks the file's shape.
  if (o.csv != nullptr) {
    FILE* f = std::fopen(o.csv, "w");
    if (f == nullptr || std::fputs(csv.c_str(), f) < 0 || std::fclose(f) != 0) {
      std::fprintf(stderr, "cannot write %s\n", o.csv);
      return 2;
    }
  }
  if (refused) std::fprintf(stderr, "bench: %d launches refused (above)\n", refused);
  return refused ? 1 : 0;
}

}  // namespace ffpa::check
