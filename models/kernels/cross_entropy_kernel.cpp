// Implementation of models/kernels/cross_entropy_kernel.h.
#include "models/kernels/cross_entropy_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "models/kernels/cpu/cpu_kernels.h"
#include "models/kernels/cpu/vector_math.h"
#include "models/kernels/cuda/kernel_glue.h"

namespace zoo::models {
namespace {

// Rows per thread task: ~1M logits, so small batches stay on one thread
// (waking LibTorch's threads beside OpenBLAS's costs more than it saves).
int64_t rows_per_task(int64_t vocab) { return std::max<int64_t>(1, (int64_t{1} << 20) / vocab); }

// Rows [begin, end) of the CPU kernel; AVX2 clones where the CPU has it.
ZOO_VECTOR_CLONES void cross_entropy_rows(const float* x, int64_t ld, const int64_t* labels, int64_t vocab,
                                          int64_t begin, int64_t end, float* lse, float* loss) {
  for (int64_t i = begin; i < end; ++i) {
    const float* row = x + i * ld;
    const float mx = max_of(row, vocab);
    float sum = 0;
    for (int64_t j = 0; j < vocab; ++j) sum += exp_nonpositive(row[j] - mx);
    lse[i] = mx + std::log(sum);
    loss[i] = lse[i] - row[labels[i]];
  }
}

ZOO_VECTOR_CLONES void cross_entropy_grad_rows(const float* x, int64_t ld, const int64_t* labels, const float* lse,
                                               const float* grad, int64_t vocab, int64_t width, int64_t begin,
                                               int64_t end, float* d) {
  for (int64_t i = begin; i < end; ++i) {
    const float* row = x + i * ld;
    float* drow = d + i * width;
    const float l = lse[i], g = grad[i];
    for (int64_t j = 0; j < vocab; ++j) drow[j] = exp_nonpositive(row[j] - l) * g;
    for (int64_t j = vocab; j < width; ++j) drow[j] = 0;
    drow[labels[i]] -= g;
  }
}

// float32 CPU logits, rows spread over threads: lse and loss of each row.
void cpu_forward_rows(const torch::Tensor& logits, const torch::Tensor& labels, int64_t vocab, torch::Tensor& lse,
                      torch::Tensor& loss) {
  const int64_t ld = logits.stride(0);
  const float* x = logits.data_ptr<float>();
  const int64_t* y = labels.data_ptr<int64_t>();
  float *pl = lse.data_ptr<float>(), *ploss = loss.data_ptr<float>();
  at::parallel_for(0, logits.size(0), rows_per_task(vocab),
                   [&](int64_t begin, int64_t end) { cross_entropy_rows(x, ld, y, vocab, begin, end, pl, ploss); });
}

void cpu_backward_rows(const torch::Tensor& logits, const torch::Tensor& labels, const torch::Tensor& lse,
                       const torch::Tensor& grad, int64_t vocab, torch::Tensor& dlogits) {
  const int64_t ld = logits.stride(0), width = logits.size(1);
  const float *x = logits.data_ptr<float>(), *pl = lse.data_ptr<float>(), *pg = grad.data_ptr<float>();
  const int64_t* y = labels.data_ptr<int64_t>();
  float* d = dlogits.data_ptr<float>();
  at::parallel_for(0, logits.size(0), rows_per_task(vocab), [&](int64_t begin, int64_t end) {
    cross_entropy_grad_rows(x, ld, y, pl, pg, vocab, width, begin, end, d);
  });
}

// Rows per float32 chunk: ~256 MB of logits at a time.
int64_t default_chunk_rows(int64_t vocab) { return std::max<int64_t>(1, (int64_t{1} << 26) / vocab); }

// Whether ATen's softmax kernels read x as it is (bfloat16/float16 on CUDA).
bool reads_reduced_precision(const torch::Tensor& x) {
  return x.is_cuda() && (x.scalar_type() == torch::kBFloat16 || x.scalar_type() == torch::kHalf);
}
// float32 log-softmax of a chunk of logits in one fused kernel: on CUDA
// straight from float16 (ATen's half_to_float), elsewhere from a float32 copy
// (ATen's CUDA kernel refuses half_to_float for bfloat16: "conversion is
// supported for Half type only"; PyTorch's autocast makes the same copy).
torch::Tensor log_softmax_float32(const torch::Tensor& x) {
  if (x.is_cuda() && x.scalar_type() == torch::kHalf) return at::_log_softmax(x, 1, /*half_to_float=*/true);
  return at::_log_softmax(x.to(torch::kFloat), 1, /*half_to_float=*/false);
}
// softmax(x) likewise, in x's dtype on CUDA (computed in float32 inside the
// kernel), else in float32.
torch::Tensor softmax_of(const torch::Tensor& x) {
  if (reads_reduced_precision(x)) return at::_softmax(x, 1, /*half_to_float=*/false);
  return at::_softmax(x.to(torch::kFloat), 1, /*half_to_float=*/false);
}

// Chunks of `rows` rows; the softmax reads each row's first `columns`
// columns (vocab, or the whole padded width where the padding is -inf), the
// rest get zero gradient.
class ChunkedCrossEntropy : public torch::autograd::Function<ChunkedCrossEntropy> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& labels, int64_t columns, int64_t rows) {
    const int64_t N = logits.size(0);
    torch::Tensor loss = torch::empty({N}, logits.options().dtype(torch::kFloat));
    for (int64_t r0 = 0; r0 < N; r0 += rows) {
      const int64_t n = std::min(rows, N - r0);
      const torch::Tensor logp = log_softmax_float32(logits.narrow(0, r0, n).narrow(1, 0, columns));
      loss.narrow(0, r0, n).copy_(logp.gather(1, labels.narrow(0, r0, n).unsqueeze(1)).squeeze(1).neg());
    }
    ctx->save_for_backward({logits, labels, loss});
    ctx->saved_data["columns"] = columns;
    ctx->saved_data["rows"] = rows;
    return loss;
  }

  // d loss / d x = g (softmax(x) - onehot(label)): each chunk's softmax is
  // recomputed straight into the logits' dtype and scaled by g into the
  // gradient (two passes over the chunk in bfloat16 on a GPU, where
  // log-softmax's backward of a float32 one-hot took five in float32). The
  // label's entry is written apart, in float32, as g expm1(-loss): its
  // probability can round to 1 in bfloat16, and p - 1 would lose it.
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &logits = saved[0], &labels = saved[1], &loss = saved[2];
    const int64_t columns = ctx->saved_data["columns"].toInt(), rows = ctx->saved_data["rows"].toInt();
    const int64_t N = logits.size(0);
    const torch::Tensor grad = grads[0].to(torch::kFloat);
    torch::Tensor dlogits = torch::empty({N, logits.size(1)}, logits.options());
    if (logits.size(1) > columns) dlogits.narrow(1, columns, logits.size(1) - columns).zero_();
    for (int64_t r0 = 0; r0 < N; r0 += rows) {
      const int64_t n = std::min(rows, N - r0);
      const torch::Tensor g = grad.narrow(0, r0, n).unsqueeze(1);
      torch::Tensor d = dlogits.narrow(0, r0, n).narrow(1, 0, columns);
      at::mul_out(d, softmax_of(logits.narrow(0, r0, n).narrow(1, 0, columns)), g);
      const torch::Tensor label_grad = torch::expm1(loss.narrow(0, r0, n).unsqueeze(1).neg()) * g;
      d.scatter_(1, labels.narrow(0, r0, n).unsqueeze(1), label_grad.to(d.scalar_type()));
    }
    return {dlogits, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// Cross-entropy through a per-row kernel pair: zoo's CPU loops for float32
// CPU logits (kernels null), or a CrossEntropyKernels table (zoo's CUDA
// kernels; in tests their CPU emulation). Forward: one pass over each row
// (max, sum of exps, log-sum-exp); backward: one (softmax - one-hot, scaled).
class RowKernelCrossEntropy : public torch::autograd::Function<RowKernelCrossEntropy> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& labels, int64_t columns, const CrossEntropyKernels* kernels) {
    const auto f32 = logits.options().dtype(torch::kFloat);
    torch::Tensor lse = torch::empty({logits.size(0)}, f32), loss = torch::empty({logits.size(0)}, f32);
    if (kernels) {
      const zoo::cuda::LaunchScope launch(logits);
      zoo::cuda::check_launch(kernels->forward(*zoo::cuda::element_type_of(logits.scalar_type()), logits.data_ptr(),
                                               logits.stride(0), labels.data_ptr<int64_t>(), logits.size(0), columns,
                                               lse.data_ptr<float>(), loss.data_ptr<float>(), launch.stream()),
                              "cross-entropy forward");
    } else {
      cpu_forward_rows(logits, labels, columns, lse, loss);
    }
    ctx->save_for_backward({logits, labels, lse});
    ctx->saved_data["columns"] = columns;
    // A static table (see CrossEntropyKernels), so its address outlives the graph.
    ctx->saved_data["kernels"] = reinterpret_cast<int64_t>(kernels);
    return loss;
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &logits = saved[0], &labels = saved[1], &lse = saved[2];
    const int64_t columns = ctx->saved_data["columns"].toInt();
    const auto* kernels = reinterpret_cast<const CrossEntropyKernels*>(ctx->saved_data["kernels"].toInt());
    const torch::Tensor grad = grads[0].to(torch::kFloat).contiguous();
    torch::Tensor dlogits = torch::empty({logits.size(0), logits.size(1)}, logits.options());
    if (kernels) {
      const zoo::cuda::LaunchScope launch(logits);
      zoo::cuda::check_launch(
          kernels->backward(*zoo::cuda::element_type_of(logits.scalar_type()), logits.data_ptr(), logits.stride(0),
                            labels.data_ptr<int64_t>(), lse.data_ptr<float>(), grad.data_ptr<float>(), logits.size(0),
                            columns, logits.size(1), dlogits.data_ptr(), launch.stream()),
          "cross-entropy backward");
    } else {
      cpu_backward_rows(logits, labels, lse, grad, columns, dlogits);
    }
    return {dlogits, torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// The loss sum_i weights[i] * CE_i, its gradient made by the forward (see
// weighted_cross_entropy_through).
class FusedRowKernelCrossEntropy : public torch::autograd::Function<FusedRowKernelCrossEntropy> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& labels, const torch::Tensor& weights, int64_t columns,
                               const CrossEntropyKernels* kernels) {
    const int64_t n = logits.size(0), width = logits.size(1);
    torch::Tensor loss = torch::empty({n}, logits.options().dtype(torch::kFloat));
    torch::Tensor dlogits = torch::empty({n, width}, logits.options());
    const zoo::cuda::LaunchScope launch(logits);
    zoo::cuda::check_launch(
        kernels->forward_with_grad(*zoo::cuda::element_type_of(logits.scalar_type()), logits.data_ptr(),
                                   logits.stride(0), labels.data_ptr<int64_t>(), weights.data_ptr<float>(), n, columns,
                                   width, loss.data_ptr<float>(), dlogits.data_ptr(), launch.stream()),
        "cross-entropy forward");
    ctx->save_for_backward({dlogits});
    ctx->saved_data["kernels"] = reinterpret_cast<int64_t>(kernels);
    return (loss * weights).sum();
  }

  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    // The gradient is scaled where it lies: a second backward would scale it again.
    TORCH_CHECK(ctx->saved_data.find("scaled") == ctx->saved_data.end(),
                "the fused cross-entropy's backward runs once (retain_graph is not supported)");
    ctx->saved_data["scaled"] = true;
    const torch::Tensor dlogits = ctx->get_saved_variables()[0];
    const auto* kernels = reinterpret_cast<const CrossEntropyKernels*>(ctx->saved_data["kernels"].toInt());
    const torch::Tensor scale = grads[0].to(torch::kFloat).contiguous();
    const zoo::cuda::LaunchScope launch(dlogits);
    zoo::cuda::check_launch(kernels->scale_grad(*zoo::cuda::element_type_of(dlogits.scalar_type()), dlogits.data_ptr(),
                                                dlogits.numel(), scale.data_ptr<float>(), launch.stream()),
                            "cross-entropy backward");
    return {dlogits, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// Logits the row kernels read: (N, width), contiguous rows, a type they take.
bool row_kernels_take(const torch::Tensor& logits) {
  return logits.dim() == 2 && logits.stride(1) == 1 && zoo::cuda::element_type_of(logits.scalar_type());
}

#ifdef ZOO_CUDA_KERNELS
const CrossEntropyKernels kCudaCrossEntropy = {zoo::cuda::cross_entropy_forward, zoo::cuda::cross_entropy_backward,
                                               zoo::cuda::cross_entropy_forward_with_grad,
                                               zoo::cuda::cross_entropy_scale_grad};
#endif

}  // namespace

torch::Tensor cross_entropy_through(const CrossEntropyKernels& kernels, const torch::Tensor& logits,
                                    const torch::Tensor& labels, int64_t columns) {
  TORCH_CHECK(row_kernels_take(logits),
              "cross_entropy_through: logits (N, width) of float32, bfloat16 or float16 with contiguous rows "
              "expected; got ",
              logits.sizes(), " ", logits.scalar_type());
  TORCH_CHECK(columns <= logits.size(1), "cross_entropy_through: ", columns, " columns of ", logits.size(1));
  return RowKernelCrossEntropy::apply(logits, labels.to(torch::kLong).contiguous(), columns, &kernels);
}

torch::Tensor weighted_cross_entropy_through(const CrossEntropyKernels& kernels, const torch::Tensor& logits,
                                             const torch::Tensor& labels, const torch::Tensor& weights,
                                             int64_t columns) {
  TORCH_CHECK(row_kernels_take(logits),
              "weighted_cross_entropy_through: logits (N, width) of float32, bfloat16 or float16 with contiguous "
              "rows expected; got ",
              logits.sizes(), " ", logits.scalar_type());
  TORCH_CHECK(columns <= logits.size(1), "weighted_cross_entropy_through: ", columns, " columns of ", logits.size(1));
  TORCH_CHECK(weights.dim() == 1 && weights.size(0) == logits.size(0),
              "weighted_cross_entropy_through: one weight per row expected; got ", weights.sizes());
  return FusedRowKernelCrossEntropy::apply(logits, labels.to(torch::kLong).contiguous(),
                                           weights.detach().to(torch::kFloat).contiguous(), columns, &kernels);
}

bool one_pass_cross_entropy_applies(const torch::Tensor& logits, const torch::Tensor& labels) {
  // float16: w * p (w ~ 1 / tokens) would underflow before the loss scale.
  return logits.is_cuda() && row_kernels_take(logits) && logits.scalar_type() != torch::kHalf &&
         labels.device() == logits.device() && have_cuda_cross_entropy_kernels() &&
         zoo::cuda::kernel_available("cross_entropy_fused") && torch::GradMode::is_enabled() && logits.requires_grad();
}

torch::Tensor one_pass_cross_entropy(const torch::Tensor& logits, const torch::Tensor& labels,
                                     const torch::Tensor& weights, int64_t columns) {
#ifdef ZOO_CUDA_KERNELS
  return weighted_cross_entropy_through(kCudaCrossEntropy, logits, labels, weights, columns);
#else
  (void)logits, (void)labels, (void)weights, (void)columns;
  throw std::logic_error("one_pass_cross_entropy: zoo was built without its CUDA kernels (-DZOO_CUDA_KERNELS=ON)");
#endif
}

bool have_cuda_cross_entropy_kernels() { return zoo::cuda::kernel_available("cross_entropy"); }

torch::Tensor token_cross_entropy(const torch::Tensor& logits, const torch::Tensor& labels, int64_t vocab,
                                  PaddingColumns padding, int64_t chunk_rows) {
  if (chunk_rows == 0 && is_cpu_float32(logits) && logits.stride(1) == 1)
    return RowKernelCrossEntropy::apply(logits, labels.contiguous(), vocab, nullptr);
  // -inf columns change neither the log-sum-exp nor the other probabilities.
  const int64_t columns = padding == PaddingColumns::neg_inf ? logits.size(1) : vocab;
#ifdef ZOO_CUDA_KERNELS
  if (chunk_rows == 0 && logits.is_cuda() && row_kernels_take(logits) && labels.device() == logits.device() &&
      have_cuda_cross_entropy_kernels())
    return cross_entropy_through(kCudaCrossEntropy, logits, labels, columns);
#endif
  return ChunkedCrossEntropy::apply(logits, labels, columns, chunk_rows > 0 ? chunk_rows : default_chunk_rows(columns));
}

}  // namespace zoo::models
