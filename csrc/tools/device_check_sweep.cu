// The device-check runner's tuning sweep (ffpa_device_check --sweep-csv FILE): every
// variant of an FFPA_SWEEP=ON build (ffpa/sweep.h, cmake/FfpaSweep.cmake) timed with
// CUDA events next to the default configuration of its path, on the bench shape (fp16,
// B = 1, H x N x D, non-causal). A variant's output is compared with the default's on
// two heads before it is timed: one that differs by more than the fp16 tolerance is
// reported "wrong" and never a winner (docs/perf.md "Tuning sweep").
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "device_check.h"
#if FFPA_SWEEP_BUILD
#include "ffpa/params.h"
#include "ffpa/sweep.h"
#endif

namespace ffpa::check {

namespace {

#if FFPA_SWEEP_BUILD
__global__ void sweep_fill(uint16_t* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    x ^= x >> 15, x *= 2246822519u, x ^= x >> 13;
    __half h = __float2half_rn((x & 0xffffff) / float(0x1000000) * 2.f - 1.f);
    p[i] = *reinterpret_cast<uint16_t*>(&h);
  }
}

float half_to_float(uint16_t bits) {
  __half h;
  *reinterpret_cast<uint16_t*>(&h) = bits;
  return __half2float(h);
}

// Time `launch` (ms per call) after warm-up; a refused launch returns a negative value.
template <typename F>
double time_ms(F launch, int warmup, int iters, std::string* error) {
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  double ms = -1;
  for (int i = 0; i < warmup + iters; ++i) {
    if (i == warmup) CHECK_CUDA(cudaEventRecord(e0));
    const ffpa::Status st = launch();
    if (!st.ok()) {
      *error = st.message;
      CHECK_CUDA(cudaDeviceSynchronize());
      cudaEventDestroy(e0), cudaEventDestroy(e1);
      return -1;
    }
  }
  CHECK_CUDA(cudaEventRecord(e1));
  const cudaError_t sync = cudaEventSynchronize(e1);
  if (sync != cudaSuccess) {
    *error = std::string("CUDA error after the launches: ") + cudaGetErrorString(sync);
  } else {
    float f = 0.f;
    CHECK_CUDA(cudaEventElapsedTime(&f, e0, e1));
    ms = f / iters;
  }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  return ms;
}

std::string csv_field(std::string s) {
  for (char& c : s)
    if (c == ',' || c == '\n') c = ';';
  return s;
}
#endif

}  // namespace

int run_sweep(const BenchOpts& o, const char* csv_path, bool dry_run) {
  std::string csv = "source,D,path,config,default,ms,tflops,max_diff,status\n";
  int bad = 0;
#if FFPA_SWEEP_BUILD
  const int n = ffpa::sweep::count();
  std::printf("sweep: %d variants in this build\n", n);
  std::vector<int> dims;
  for (int i = 0; i < n; ++i) {
    const int d = ffpa::sweep::get(i)->head_dim;
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) dims.push_back(d);
  }
  for (int d : dims) {
    std::vector<std::string> paths;
    for (int i = 0; i < n; ++i) {
      const ffpa::sweep::Variant* v = ffpa::sweep::get(i);
      if (v->head_dim == d && std::find(paths.begin(), paths.end(), v->path) == paths.end()) paths.push_back(v->path);
    }
    if (dry_run) {  // the plan, printed and written as rows with status "planned"
      for (const std::string& p : paths) {
        const std::string c = ffpa::sweep::default_config(p, d);
        std::printf("sweep plan: D=%d path=%s default %s\n", d, p.c_str(), c.c_str());
        csv += "ffpa-sweep," + std::to_string(d) + "," + p + "," + c + ",1,,,,planned\n";
        for (int i = 0; i < n; ++i) {
          const ffpa::sweep::Variant* v = ffpa::sweep::get(i);
          if (v->head_dim != d || p != v->path) continue;
          std::printf("sweep plan: D=%d path=%s %s\n", d, v->path, v->config);
          csv += "ffpa-sweep," + std::to_string(d) + "," + p + "," + v->config + ",0,,,,planned\n";
        }
      }
      continue;
    }
    const int64_t elems = int64_t(o.h) * o.n * d;
    const int64_t head = int64_t(o.n) * d;
    uint16_t *q, *k, *v, *out;
    CHECK_CUDA(cudaMalloc(&q, elems * 2));
    CHECK_CUDA(cudaMalloc(&k, elems * 2));
    CHECK_CUDA(cudaMalloc(&v, elems * 2));
    CHECK_CUDA(cudaMalloc(&out, elems * 2));
    sweep_fill<<<1024, 256>>>(q, elems, 11u);
    sweep_fill<<<1024, 256>>>(k, elems, 12u);
    sweep_fill<<<1024, 256>>>(v, elems, 13u);
    CHECK_CUDA(cudaGetLastError());
    const double flop = 4.0 * o.h * double(o.n) * o.n * d;
    ffpa::ForwardArgs a;
    set_desc(a.q, q, false, 1, o.h, o.n, d, ffpa::DType::kFp16);
    set_desc(a.k, k, false, 1, o.h, o.n, d, ffpa::DType::kFp16);
    set_desc(a.v, v, false, 1, o.h, o.n, d, ffpa::DType::kFp16);
    set_desc(a.out, out, false, 1, o.h, o.n, d, ffpa::DType::kFp16);
    a.scale = 1.f / std::sqrt(float(d));
    // The variants take FwdParams, built here as forward() builds them (contiguous BHND).
    ffpa::FwdParams p;
    p.q = q, p.k = k, p.v = v, p.o = out;
    p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = p.o_batch_stride = elems;
    p.q_head_stride = p.k_head_stride = p.v_head_stride = p.o_head_stride = head;
    p.q_row_stride = p.k_row_stride = p.v_row_stride = p.o_row_stride = d;
    p.b = 1, p.hq = o.h, p.hkv = o.h, p.nq = o.n, p.nkv = o.n, p.head_dim = d, p.h_ratio = 1;
    p.scale = a.scale, p.scale_log2 = a.scale * 1.4426950408889634f;
    std::vector<uint16_t> ref(2 * head), got(2 * head);
    auto fetch = [&](std::vector<uint16_t>& dst) {  // heads 0 and H-1
      CHECK_CUDA(cudaMemcpy(dst.data(), out, head * 2, cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemcpy(dst.data() + head, out + (o.h - 1) * head, head * 2, cudaMemcpyDeviceToHost));
    };
    for (const std::string& path : paths) {
      a.impl = path == "tma" ? ffpa::Impl::kTma : path == "cute_tma" ? ffpa::Impl::kCuteTma
               : path == "cute" ? ffpa::Impl::kCute : ffpa::Impl::kMma;
      std::string err;
      CHECK_CUDA(cudaMemset(out, 0, elems * 2));
      const ffpa::Status st0 = ffpa::forward(a);
      double ms = -1;
      if (st0.ok()) {
        CHECK_CUDA(cudaDeviceSynchronize());
        fetch(ref);
        ms = time_ms([&] { return ffpa::forward(a); }, o.warmup, o.iters, &err);
      } else {
        err = st0.message;
      }
      char line[512];
      if (ms < 0) {
        ++bad;
        std::snprintf(line, sizeof(line), "ffpa-sweep,%d,%s,%s,1,,,,refused: %s\n", d, path.c_str(),
                      ffpa::sweep::default_config(path, d).c_str(), csv_field(err).c_str());
        std::printf("sweep: %s", line);
        csv += line;
        continue;
      }
      std::snprintf(line, sizeof(line), "ffpa-sweep,%d,%s,%s,1,%.4f,%.2f,0,ok\n", d, path.c_str(),
                    ffpa::sweep::default_config(path, d).c_str(), ms, flop / (ms * 1e-3) / 1e12);
      std::printf("sweep: %s", line);
      std::fflush(stdout);
      csv += line;
      for (int i = 0; i < n; ++i) {
        const ffpa::sweep::Variant* var = ffpa::sweep::get(i);
        if (var->head_dim != d || path != var->path) continue;
        err.clear();
        CHECK_CUDA(cudaMemset(out, 0, elems * 2));
        const ffpa::Status st = var->launch(p);
        const cudaError_t ce = st.ok() ? cudaDeviceSynchronize() : cudaSuccess;
        std::string status = "ok";
        double diff = NAN, vms = -1;
        if (!st.ok() || ce != cudaSuccess) {
          status = "refused: " + csv_field(st.ok() ? cudaGetErrorString(ce) : st.message);
          if (ce != cudaSuccess) {  // a sticky error poisons the context: stop here, say so
            std::snprintf(line, sizeof(line), "ffpa-sweep,%d,%s,%s,0,,,,%s\n", d, var->path, var->config,
                          status.c_str());
            csv += line;
            std::printf("sweep: %s", line);
            ++bad;
            goto write;
          }
        } else {
          fetch(got);
          diff = 0;
          for (size_t j = 0; j < got.size(); ++j)
            diff = std::max(diff, double(std::fabs(half_to_float(got[j]) - half_to_float(ref[j]))));
          // The default passed the correctness phase; fp16's abs tolerance bounds the difference.
          if (!(diff <= 2e-2)) status = "wrong: differs from the default by more than 2e-2";
          vms = time_ms([&] { return var->launch(p); }, o.warmup, o.iters, &err);
          if (vms < 0) status = "refused: " + csv_field(err);
        }
        if (status != "ok") ++bad;
        if (vms > 0)
          std::snprintf(line, sizeof(line), "ffpa-sweep,%d,%s,%s,0,%.4f,%.2f,%.3g,%s\n", d, var->path, var->config,
                        vms, flop / (vms * 1e-3) / 1e12, diff, status.c_str());
        else
          std::snprintf(line, sizeof(line), "ffpa-sweep,%d,%s,%s,0,,,,%s\n", d, var->path, var->config,
                        status.c_str());
        std::printf("sweep: %s", line);
        std::fflush(stdout);
        csv += line;
      }
    }
    cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(out);
  }
write:
#else
  (void)o;
  std::printf("sweep: this build has no sweep variants (configure the kernels-only tree with -DFFPA_SWEEP=ON)\n");
  if (!dry_run) bad = 1;
#endif
  if (csv_path != nullptr) {
    FILE* f = std::fopen(csv_path, "w");
    if (f == nullptr || std::fputs(csv.c_str(), f) < 0 || std::fclose(f) != 0) {
      std::fprintf(stderr, "cannot write %s\n", csv_path);
      return 2;
    }
  }
  if (bad) std::fprintf(stderr, "sweep: %d configurations refused, wrong or missing (above)\n", bad);
  return bad ? 1 : 0;
}

}  // namespace ffpa::check
