// Implementation of models/common/embedding_kernel.h.
#include "models/common/embedding_kernel.h"

#include <string>

#include "models/common/cpu_kernels.h"

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

}  // namespace

bool cpu_embedding_available(const torch::Tensor& ids, const torch::Tensor& words, const torch::Tensor& positions) {
  return ids.device().is_cpu() && ids.scalar_type() == torch::kLong && ids.dim() == 2 && is_cpu_float32(words) &&
         is_cpu_float32(positions);
}

torch::Tensor cpu_embedding_sum(const torch::Tensor& ids, const torch::Tensor& words, const torch::Tensor& positions,
                                int64_t first) {
  TORCH_CHECK(ids.dim() == 2 && words.dim() == 2 && positions.dim() == 2 && words.size(1) == positions.size(1) &&
                  first >= 0 && first + ids.size(1) <= positions.size(0),
              "cpu_embedding_sum: expected ids (B, T), words (V, C), positions (P, C) with first + T <= P");
  return EmbeddingSumFunction::apply(ids, words, positions, first);
}

}  // namespace zoo::models
