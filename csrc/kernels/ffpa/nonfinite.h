// The non-finite pre-pass's arguments (the kernel is ffpa/nonfinite.cuh, which says what
// the pass does). Host-compiler friendly: src/nonfinite_prepass.cu and the CPU emulator's drivers fill it.
#pragma once

#include <cstdint>

namespace ffpa {

struct NonfiniteScan {
  static constexpr int kMaxOperands = 4;  // q, k, v, dout
  static constexpr int kRowsPerBlock = 8;
  static constexpr int kNThreads = 256;
  const void* data[kMaxOperands] = {};
  int64_t batch_stride[kMaxOperands] = {}, head_stride[kMaxOperands] = {}, row_stride[kMaxOperands] = {};
  int heads[kMaxOperands] = {};  // Hq (q, dout) or Hkv (k, v); 0: operand not scanned
  int rows[kMaxOperands] = {};
  // Per operand, int32 [B] row counts (device memory) below which a batch entry's rows are
  // scanned: seqused_k for k and v of a padded batch, whose later keys are not part of the
  // problem (ffpa/mask.h); nullptr: every row.
  const int* rows_used[kMaxOperands] = {};
  int n_operands = 0;
  int hq = 0, h_ratio = 1, d = 0;
  uint16_t exp_mask = 0x7c00;  // the exponent bits: fp16 0x7c00, bf16 0x7f80
  int* flags = nullptr;        // [B, Hq], zeroed before the launch
  int total_heads = 0;         // sum of heads[]: gridDim.y
  int max_rows = 0;            // max of rows[]: gridDim.x * kRowsPerBlock covers it

  // One [B, H, N, D] operand to scan (strides in elements, unit stride along D).
  void add(const void* ptr, const int64_t* shape, const int64_t* stride, const int* used = nullptr) {
    const int i = n_operands++;
    data[i] = ptr;
    rows_used[i] = used;
    batch_stride[i] = stride[0], head_stride[i] = stride[1], row_stride[i] = stride[2];
    heads[i] = static_cast<int>(shape[1]);
    rows[i] = static_cast<int>(shape[2]);
    total_heads += heads[i];
    max_rows = rows[i] > max_rows ? rows[i] : max_rows;
  }
  // gridDim.x (gridDim.y is total_heads, gridDim.z the batch).
  int grid_x() const { return (max_rows + kRowsPerBlock - 1) / kRowsPerBlock; }
};

}  // namespace ffpa
