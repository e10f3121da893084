// Implementation of models/kernels/embedding_kernel.h.
#include "models/kernels/embedding_kernel.h"

#include <string>

#include "models/kernels/cpu/cpu_kernels.h"
#include "models/kernels/cuda/kernel_glue.h"
#include "models/kernels/policy.h"

namespace zoo::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

class EmbeddingSumFunction : public torch::autograd::Function<EmbeddingSumFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& ids_in, const torch::Tensor& words_in,
                               const torch::Tensor& positions_in, int64_t first) {
    const torch::Tensor ids = ids_in.contiguous(), words = words_in.contiguous(), positions = positions_in.contiguous();
    const int64_t B = ids.size(0), T = ids.size(1), V = words.size(0), C = words.size(1);
    const int64_t* id = ids.data_ptr<int64_t>();
    for (int64_t i = 0; i < B * T; ++i)
      TORCH_CHECK(id[i] >= 0 && id[i] < V, "token id ", id[i], " is outside the vocabulary [0, ", V, ")");
    torch::Tensor out = torch::empty({B, T, C}, words.options());
    const float *w = words.data_ptr<float>(), *p = positions.data_ptr<float>() + first * C;
    float* o = out.data_ptr<float>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const float* wr = w + id[b * T + t] * C;
        const float* pr = p + t * C;
        float* orow = o + (b * T + t) * C;
        for (int64_t c = 0; c < C; ++c) orow[c] = wr[c] + pr[c];
      }
    ctx->save_for_backward({ids});
    ctx->saved_data["shape"] = std::vector<int64_t>{V, positions.size(0), first};
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const torch::Tensor ids = ctx->get_saved_variables()[0];
    const std::vector<int64_t> shape = ctx->saved_data["shape"].toIntVector();
    const int64_t V = shape[0], P = shape[1], first = shape[2];
    const torch::Tensor dy = grads[0].contiguous();
    const int64_t B = dy.size(0), T = dy.size(1), C = dy.size(2);
    const int64_t* id = ids.data_ptr<int64_t>();
    const float* g = dy.data_ptr<float>();
    torch::Tensor dwords, dpositions;
    if (ctx->needs_input_grad(1)) {
      dwords = torch::zeros({V, C}, dy.options());
      float* dw = dwords.data_ptr<float>();
      for (int64_t i = 0; i < B * T; ++i) {
        float* row = dw + id[i] * C;
        const float* gr = g + i * C;
        for (int64_t c = 0; c < C; ++c) row[c] += gr[c];
      }
    }
    if (ctx->needs_input_grad(2)) {
      dpositions = torch::zeros({P, C}, dy.options());
      float* dp = dpositions.data_ptr<float>() + first * C;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T; ++t) {
          float* row = dp + t * C;
          const float* gr = g + (b * T + t) * C;
          for (int64_t c = 0; c < C; ++c) row[c] += gr[c];
        }
    }
    return {torch::Tensor(), dwords, dpositions, torch::Tensor()};
  }
};

// words[ids], with words' gradient from zoo's kernels (embedding_through).
class KernelEmbeddingFunction : public torch::autograd::Function<KernelEmbeddingFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& ids, const torch::Tensor& words,
                               const EmbeddingKernels* kernels) {
    ctx->save_for_backward({ids});
    ctx->saved_data["rows"] = words.size(0);
    ctx->saved_data["kernels"] = reinterpret_cast<int64_t>(kernels);
    return at::embedding(words, ids);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    if (!ctx->needs_input_grad(1)) return {torch::Tensor(), torch::Tensor(), torch::Tensor()};
    const torch::Tensor ids = ctx->get_saved_variables()[0].reshape({-1});
    const auto* kernels = reinterpret_cast<const EmbeddingKernels*>(ctx->saved_data["kernels"].toInt());
    const int64_t V = ctx->saved_data["rows"].toInt(), n = ids.numel();
    const torch::Tensor dy = grads[0].to(torch::kFloat).contiguous().view({n, -1});
    const int64_t C = dy.size(1);
    // Stable: equal ids keep their order, so each sum is added the same way every run.
    const auto sorted_and_order = at::sort(ids, /*stable=*/c10::optional<bool>(true), /*dim=*/0, /*descending=*/false);
    const torch::Tensor& sorted = std::get<0>(sorted_and_order);
    const torch::Tensor& order = std::get<1>(sorted_and_order);
    torch::Tensor grad = torch::zeros({V, C}, dy.options());
    const torch::Tensor partials = torch::empty({2, kernels->grad_tasks(n), C}, dy.options());
    const zoo::cuda::LaunchScope launch(dy);
    zoo::cuda::check_launch(kernels->grad(sorted.data_ptr<int64_t>(), order.data_ptr<int64_t>(), dy.data_ptr<float>(),
                                          n, C, grad.data_ptr<float>(), partials[0].data_ptr<float>(),
                                          partials[1].data_ptr<float>(), launch.stream()),
                            "embedding backward");
    return {torch::Tensor(), grad, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor embedding_through(const EmbeddingKernels& kernels, const torch::Tensor& ids, const torch::Tensor& words) {
  TORCH_CHECK(ids.scalar_type() == torch::kLong && words.dim() == 2 && words.scalar_type() == torch::kFloat &&
                  ids.device() == words.device(),
              "embedding_through: int64 ids and a float32 (V, C) table on one device expected; got ", ids.scalar_type(),
              " ids and a ", words.scalar_type(), " table of ", words.sizes());
  return KernelEmbeddingFunction::apply(ids, words, &kernels);
}

bool cuda_embedding_available(const torch::Tensor& ids, const torch::Tensor& words) {
  return ids.is_cuda() && ids.scalar_type() == torch::kLong && words.device() == ids.device() && words.dim() == 2 &&
         words.scalar_type() == torch::kFloat && words.requires_grad() && torch::GradMode::is_enabled() &&
         zoo::cuda::kernel_available("embedding");
}

torch::Tensor cuda_embedding(const torch::Tensor& ids, const torch::Tensor& words) {
#ifdef ZOO_CUDA_KERNELS
  static const EmbeddingKernels kernels = {zoo::cuda::embedding_grad_tasks, zoo::cuda::embedding_grad};
  return embedding_through(kernels, ids, words);
#else
  (void)ids, (void)words;
  throw std::logic_error("cuda_embedding: zoo was built without its CUDA kernels (-DZOO_CUDA_KERNELS=ON)");
#endif
}

bool cpu_embedding_available(const torch::Tensor& ids, const torch::Tensor& words, const torch::Tensor& positions) {
  return kernel_policy().cpu_kernels && ids.device().is_cpu() && ids.scalar_type() == torch::kLong && ids.dim() == 2 &&
         is_cpu_float32(words) && is_cpu_float32(positions);
}

torch::Tensor cpu_embedding_sum(const torch::Tensor& ids, const torch::Tensor& words, const torch::Tensor& positions,
                                int64_t first) {
  TORCH_CHECK(ids.dim() == 2 && words.dim() == 2 && positions.dim() == 2 && words.size(1) == positions.size(1) &&
                  first >= 0 && first + ids.size(1) <= positions.size(0),
              "cpu_embedding_sum: expected ids (B, T), words (V, C), positions (P, C) with first + T <= P");
  return EmbeddingSumFunction::apply(ids, words, positions, first);
}

}  // namespace zoo::models
