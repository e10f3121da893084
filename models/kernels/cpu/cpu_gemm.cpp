// Implementation of models/kernels/cpu/cpu_gemm.h.
#include "models/kernels/cpu/cpu_gemm.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "models/kernels/policy.h"

#ifdef ZOO_HAVE_BLAS
extern "C" void sgemm_(const char* transa, const char* transb, const int* m, const int* n, const int* k,
                       const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
                       const float* beta, float* c, const int* ldc);
#endif

namespace zoo::models {
namespace {

// oneDNN's C API (dnnl.h), row-major; returns dnnl_success (0) or an error code.
using DnnlSgemm = int (*)(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

struct Backend {
  DnnlSgemm dnnl = nullptr;
  bool blas = false;
};

// What this process has loaded (found once: the libraries do not change).
const Backend& loaded() {
  static const Backend b = [] {
    Backend out;
#ifdef ZOO_HAVE_BLAS
    out.blas = true;
#endif
    out.dnnl = reinterpret_cast<DnnlSgemm>(dlsym(RTLD_DEFAULT, "dnnl_sgemm"));
    return out;
  }();
  return b;
}

// The kernel policy's cpu_gemm_blas picks the BLAS even where oneDNN is there (to compare them).
Backend backend() {
  Backend b = loaded();
  if (b.blas && kernel_policy().cpu_gemm_blas) b.dnnl = nullptr;
  return b;
}

}  // namespace

bool cpu_gemm_available() { return backend().dnnl || backend().blas; }

const char* cpu_gemm_backend() { return backend().dnnl ? "oneDNN" : backend().blas ? "BLAS" : "none"; }

void cpu_gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
              const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const Backend be = backend();
  // Below ~0.5M multiply-adds (attention's per-head blocks) OpenBLAS's small
  // kernels beat oneDNN, whose per-call cost dominates there.
  constexpr int64_t kSmallGemm = int64_t{1} << 19;
  if (be.dnnl && !(be.blas && m * n * k <= kSmallGemm)) {
    if (be.dnnl(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) != 0)
      throw std::runtime_error("cpu_gemm: dnnl_sgemm refused its arguments");
    return;
  }
#ifdef ZOO_HAVE_BLAS
  // The column-major BLAS reads row-major C as C^T = op(B)^T op(A)^T.
  const char ta = trans_a ? 'T' : 'N', tb = trans_b ? 'T' : 'N';
  const int M = int(n), N = int(m), K = int(k), LA = int(lda), LB = int(ldb), LC = int(ldc);
  sgemm_(&tb, &ta, &M, &N, &K, &alpha, b, &LB, a, &LA, &beta, c, &LC);
#else
  throw std::logic_error("cpu_gemm: no CPU GEMM in this process (check cpu_gemm_available first)");
#endif
}

}  // namespace zoo::models
