// Float math for zoo's CPU kernels: written so the loops that
// use it vectorize, with the accuracy the kernels document.
// Defines: ZOO_VECTOR_CLONES, exp_nonpositive, max_of, ColumnSums, column_sums.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

// Marks a hot loop function to be compiled for AVX-512 and AVX2 as well as
// the baseline, picked at load time by the CPU: the baseline's 4-wide SSE
// made the exp-heavy kernels several times slower than LibTorch's own.
#define ZOO_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

namespace zoo::models {

// exp(x) for x <= 0: Cephes' polynomial on x - n ln2, times 2^n built from
// the exponent bits. Relative error ~2e-7; arguments below -87 give ~1e-38.
inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  const int32_t n = int32_t(x * 1.44269504f - 0.5f);  // round(x / ln2): truncation toward zero of a value <= 0
  const float r = x - float(n) * 0.693359375f + float(n) * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (n + 127) << 23;
  float two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  return p * two_n;
}

// max(x[0..n)), n >= 1. Eight running maxima, elementwise, so the compiler
// can use vector max instructions without reassociating a reduction.
inline float max_of(const float* x, int64_t n) {
  float lanes[8];
  for (int k = 0; k < 8; ++k) lanes[k] = x[0];
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    for (int k = 0; k < 8; ++k) lanes[k] = x[j + k] > lanes[k] ? x[j + k] : lanes[k];
  float m = lanes[0];
  for (int k = 1; k < 8; ++k) m = lanes[k] > m ? lanes[k] : m;
  for (; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

// Column sums of many rows (bias and norm-weight gradients) without float32
// drift: rows add into float sums, which vectorize, over blocks of 256 rows,
// and each block's sums into double.
class ColumnSums {
 public:
  explicit ColumnSums(int64_t cols) : block_(cols, 0.0f), total_(cols, 0.0) {}
  // The float sums to add row r into; rows come in order from 0.
  float* row_sums(int64_t r) {
    if (r > 0 && r % kBlockRows == 0) flush();
    return block_.data();
  }
  void write(float* out) {
    flush();
    for (size_t j = 0; j < total_.size(); ++j) out[j] = float(total_[j]);
  }

 private:
  static constexpr int64_t kBlockRows = 256;
  void flush() {
    for (size_t j = 0; j < total_.size(); ++j) {
      total_[j] += block_[j];
      block_[j] = 0.0f;
    }
  }
  std::vector<float> block_;
  std::vector<double> total_;
};

// out = the column sums of m (rows x cols, row-major), through ColumnSums.
inline void column_sums(const float* m, int64_t rows, int64_t cols, float* out) {
  ColumnSums sums(cols);
  for (int64_t r = 0; r < rows; ++r) {
    float* s = sums.row_sums(r);
    const float* row = m + r * cols;
    for (int64_t j = 0; j < cols; ++j) s[j] += row[j];
  }
  sums.write(out);
}

}  // namespace zoo::models
