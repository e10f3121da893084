// Row-major float32 GEMM on the CPU for zoo's kernels, on the fastest one
// LibTorch brought along: oneDNN's dnnl_sgemm where LibTorch links oneDNN as
// a shared library (Debian's does), else the BLAS it uses (OpenBLAS). On the
// dense-layer GEMMs of small transformers oneDNN is the faster, and scales
// to a second core where OpenBLAS does not; for tiny ones
// (attention's 64 x 64 x 16 blocks) OpenBLAS's small kernels win, so those
// go to the BLAS where there is one.
// Defines: cpu_gemm_available, cpu_gemm_backend, cpu_gemm.
#pragma once

#include <cstdint>

namespace zoo::models {

// Whether this process has a CPU GEMM to call; the kernels built on it fall
// back to LibTorch's ops when not.
bool cpu_gemm_available();
// "oneDNN", "BLAS" or "none".
const char* cpu_gemm_backend();

// C (m x n) = alpha op(A) op(B) + beta C, all row-major with leading
// dimensions lda, ldb, ldc; op(X) = X^T when trans_x. beta = 0 ignores C's
// contents (NaN included). Threads as LibTorch's intra-op setting says.
void cpu_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
              const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace zoo::models
