// LoRA, applied from outside the model as modelzoo's make_model_lora does:
// adapters on the dense layers that lora_params' groups target, every other
// parameter frozen. Each adapter wraps its frozen layer (LoraDense, as
// torchtitan's LoRALinear and PEFT's LoraLayer); the layer only adds what its
// adapter gives. Defines: LoraDense, LoraLayer, apply_lora, lora_layers,
// module_names_for_matching, peft_name_of, LoraMergeGuard, merge_lora.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "models/common/layers.h"
#include "models/common/lora_config.h"

namespace zoo::models {

// LoRA on a frozen dense layer: its output plus lora_scaling * B A dropout(x)
// (x W^T + b + alpha / r * dropout(x) A^T B^T), unless B A is folded into the
// weight. A and B are registered on the wrapped layer as lora_A and lora_B,
// as modelzoo's LoRA_Linear names them, so checkpoints keep modelzoo's keys.
class LoraDense final : public DenseAdapter {
 public:
  // A (r, in) Kaiming-uniform (a = sqrt(5), as torch.nn.Linear's weight), B
  // (out, r) zero, in float32 on the layer's device.
  LoraDense(DenseImpl& base, const LoraGroup& group);
  bool active() const override { return !unmerged_weight.defined(); }
  torch::Tensor add_to(const torch::Tensor& y, const torch::Tensor& x, bool training) override;
  torch::Tensor output(const torch::Tensor& x, bool training) override;
  // Folds B A into the base's weight (evaluation with merge_weights), and back.
  void merge();
  void unmerge();

  DenseImpl& base;
  torch::Tensor lora_A;  // (r, in)
  torch::Tensor lora_B;  // (out, r)
  double lora_scaling = 0.0, lora_dropout = 0.0;
  bool lora_merge_weights = false;
  torch::Tensor unmerged_weight;  // the base weight's own tensor while B A is merged into it

 private:
  torch::Tensor scaled_input(const torch::Tensor& x, bool training);  // lora_scaling * dropout(x) A^T
};

struct LoraLayer {
  std::string path;  // the dense layer's module path, e.g. "transformer_decoder.layers.0.self_attn.proj_q_dense_layer"
  LoraDense* layer;
};

// The names a dense layer at `path` answers to in target_modules: each part
// of its path, the class names of the modules it sits in (zoo's, as modelzoo
// names them: TransformerDecoderLayer, MultiheadAttention,
// FeedForwardNetwork, Linear, ...) and PEFT's name for it (q_proj, k_proj,
// v_proj, o_proj, gate_proj, up_proj, down_proj) where it has one.
std::vector<std::string> module_names_for_matching(const torch::nn::Module& model, const std::string& path);

// PEFT's name (q_proj, ..., down_proj) for the dense layer at `path`, or "" where it has none.
std::string peft_name_of(const std::string& path);

// Wraps each dense layer the first matching group targets (every name of
// target_modules among its names; unset: the dense layers of the model's
// transformer layers) in a LoraDense of the group's r, alpha / r and dropout;
// then stops the gradient of every other parameter. Throws std::invalid_argument
// naming a group whose target_modules match no layer.
std::vector<LoraLayer> apply_lora(torch::nn::Module& model, const std::vector<LoraGroup>& groups);

// The dense layers of `model` that carry an adapter.
std::vector<LoraLayer> lora_layers(torch::nn::Module& model);

// While alive, B A folds into the weights of the layers whose group has
// merge_weights (as modelzoo does for evaluation); the weights' own tensors
// come back untouched afterwards, so training resumes bit for bit.
class LoraMergeGuard {
 public:
  explicit LoraMergeGuard(torch::nn::Module& model);
  ~LoraMergeGuard();
  LoraMergeGuard(const LoraMergeGuard&) = delete;
  LoraMergeGuard& operator=(const LoraMergeGuard&) = delete;

 private:
  std::vector<LoraDense*> merged_;
};

// w + scaling B A, in w's dtype (computed in float32 or wider).
torch::Tensor merge_lora(const torch::Tensor& w, const torch::Tensor& a, const torch::Tensor& b, double scaling);

}  // namespace zoo::models
