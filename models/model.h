// The contract between the runner and every model family. The runner sees
// only this: a torch::nn::Module that turns a batch of named features into a
// loss and metric terms. Defines: Features, kPackedSequenceFeatures, optional_feature,
// MetricTerm, ModelOutput, GenerationCache, Model, norm_parameter_names, parameter_count,
// trainable_parameter_count.
#pragma once

#include <torch/torch.h>

#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace zoo::models {

// A batch as the data processors yield it, e.g. input_ids / attention_mask / labels (B, T).
using Features = std::map<std::string, torch::Tensor>;

// A row packing several sequences (modelzoo's variable sequence length,
// VSL) carries, per token, attention_span (tokens after it in its sequence)
// and position_ids (tokens before it), both 0 at padding. A model must
// attend within each sequence to take such rows (ModelSpec::reads_if_present).
inline const std::vector<std::string> kPackedSequenceFeatures = {"attention_span", "position_ids"};

// One eval metric as a ratio of sums, accumulated by the runner over batches.
struct MetricTerm {
  // sum/count; exp(sum/count) for perplexity; macro_mean: sum and count are
  // vectors (one entry per class) and the metric is the mean of sum/count
  // over the entries whose count is > 0 (macro-averaged F1).
  enum class Reduce { mean, exp_mean, macro_mean };
  torch::Tensor sum;
  torch::Tensor count;
  Reduce reduce = Reduce::mean;
};

struct ModelOutput {
  torch::Tensor loss;                         // scalar, what backward() runs on
  std::map<std::string, MetricTerm> metrics;  // filled when computing metrics
};

// Opaque per-model state carried between incremental decoding calls.
struct GenerationCache {
  int64_t positions = 0;             // tokens already processed
  std::vector<torch::Tensor> state;  // model-defined, e.g. per-layer keys and values
};

// The batch's feature `name`, or an undefined tensor when it has none (features a model may do without).
inline torch::Tensor optional_feature(const Features& batch, const std::string& name) {
  const auto it = batch.find(name);
  return it == batch.end() ? torch::Tensor() : it->second;
}

// Parameters matched by fnmatch globs over their names, and the factor on their learning rate.
struct LrAdjustmentGroup {
  std::vector<std::string> patterns;
  double scale = 1.0;
};

class Model : public torch::nn::Module {
 public:
  // with_metrics: also fill ModelOutput::metrics (eval).
  virtual ModelOutput forward(const Features& batch, bool with_metrics) = 0;
  // Forward-pass FLOPs per token at the model's full sequence length.
  virtual double forward_flops_per_token() const = 0;
  // Initializes every parameter as the config says (no-op on meta tensors).
  virtual void reset_parameters() = 0;
  // Models that read token ids: how many there are (the loaders check the data against it).
  virtual std::optional<int64_t> vocab_size() const { return std::nullopt; }

  // Causal LMs: logits (B, T, V) for input_ids (B, T) that continue the
  // positions held in `cache` (empty at first), whose keys/values it extends.
  virtual bool is_causal_lm() const { return false; }
  virtual torch::Tensor next_logits(const torch::Tensor& input_ids, GenerationCache& cache);
  virtual int64_t max_positions() const { return 0; }
  // Named parameter groups whose learning rate muP scales (the model's own
  // scale; optimizer.adjust_learning_rate overrides it by name).
  virtual std::map<std::string, LrAdjustmentGroup> lr_adjustment_groups() const { return {}; }

  // Causal LMs: each sample's log-likelihood of its labels, log p(labels[t] |
  // input_ids[..t]) summed over the positions where attention_mask (the loss
  // mask) is 1, or averaged over them with `average`: float32 (B). What
  // preference training (DPO) scores a response by.
  virtual torch::Tensor label_log_likelihood(const Features& batch, bool average);

  // Checkpoints: the prefix of every key in the saved "model" state dict.
  // modelzoo keeps a model under its wrapper's `model` attribute, hence
  // "model."; a model that is modelzoo's top-level module itself (DPO, whose
  // keys are policy_model.model.* and ref_model.model.*) returns "".
  virtual std::string checkpoint_key_prefix() const { return "model."; }
  // The checkpoint's tensors (keys without the prefix) as this model loads
  // them; DPO starts its policy and its reference from a plain decoder's checkpoint.
  virtual std::map<std::string, torch::Tensor> adapt_loaded_state(std::map<std::string, torch::Tensor> saved) const {
    return saved;
  }
  // (alias, source) key prefixes: tensors under `source` are saved under
  // `alias` as well, where modelzoo's module tree holds one module twice
  // (its state dict then lists it under both names); loading skips them.
  virtual std::vector<std::pair<std::string, std::string>> saved_aliases() const { return {}; }
};

inline torch::Tensor Model::next_logits(const torch::Tensor&, GenerationCache&) {
  throw std::logic_error("this model does not generate text");
}

inline torch::Tensor Model::label_log_likelihood(const Features&, bool) {
  throw std::logic_error("this model does not score label sequences (not a causal LM)");
}

// Names of parameters that belong to normalization layers (no weight decay).
std::set<std::string> norm_parameter_names(const torch::nn::Module& model);

// Number of parameter elements (what "a 111M model" counts).
inline int64_t parameter_count(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

// Number of parameter elements the optimizer updates (DPO's frozen reference left out).
inline int64_t trainable_parameter_count(const torch::nn::Module& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters())
    if (p.requires_grad()) n += p.numel();
  return n;
}

}  // namespace zoo::models
