// GPT-2 / GPT-3 (Cerebras-GPT) decoder-only language model built from the
// modelzoo `model` section. Defines: Gpt2Options, DecoderVariant, Gpt2Model,
// Gpt2Spec, gpt2_family.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

#include "models/common/decoder_lm_fields.h"
#include "models/common/embedding.h"
#include "models/common/initializers.h"
#include "models/common/layers.h"
#include "models/common/lm_loss.h"
#include "models/common/moe.h"
#include "models/common/transformer_decoder.h"
#include "models/model.h"
#include "models/registry.h"

namespace zoo::models {

// modelzoo's `extra_ffn_params` mapping (the FFN's extra constructor arguments).
struct ExtraFfnParams {
  bool static_dual_expert = false;  // multimodal: image and text tokens through separate FFN weights
  static const config::Schema<ExtraFfnParams>& schema();
};

// Every key of the gpt2/gpt3 `model` section (also used by LLaMA-style
// configs, as in modelzoo); defaults are modelzoo's.
struct Gpt2Options : DecoderLmOptions {
  std::optional<int64_t> attention_sliding_window_length;  // Mistral: attend to this many recent tokens
  std::optional<int64_t> attention_sink_tokens;            // with the window: the first tokens stay visible
  bool sliding_window_every_other_decoder_layer = false;   // Gemma 2: the window on alternate layers
  std::string sliding_window_every_other_decoder_layer_pattern = "full_attention_first";
  std::optional<double> attention_logit_softcapping;   // Gemma 2: scores -> cap * tanh(scores / cap)
  std::optional<double> final_logit_softcapping;       // Gemma 2: logits -> cap * tanh(logits / cap)
  bool norm_first_sandwich = false;                    // Gemma 2: norms after attention and FFN too
  std::optional<std::string> attention_qk_norm_layer;  // Qwen3: q and k normalized per head (rmsnorm, layernorm)
  double attention_qk_norm_eps = 1e-5;
  bool alibi_trainable_slopes = false;        // alibi: train the per-head slopes
  bool embedding_layer_norm = false;          // BLOOM: a norm (embedding_ln_f) after the embeddings
  std::optional<double> output_logits_scale;  // muP of modelzoo <= 2.2: times the logits
  bool scale_qk_dot_by_layer_idx = false;     // layer i's scores also / (i + 1)
  double dropout_rate = 0.1;
  std::optional<double> embedding_dropout_rate;  // default: dropout_rate
  std::optional<double> attention_dropout_rate;  // default: dropout_rate
  ExtraFfnParams extra_ffn_params;
  MoeOptions moe;  // Mixtral: experts in place of each layer's FFN (modelzoo's mixtral model is this one)

  static const config::Schema<Gpt2Options>& schema();
};

// What a family built on this model changes beyond Gpt2Options (GPT-J,
// GPT-NeoX and Falcon: models/gptj/).
struct DecoderVariant {
  bool parallel_residual = false;  // see DecoderLayerOptions
  bool untied_norms = true;
  bool mup_depth_scaling = true;  // muP also scales the output layers' initializers by 1/sqrt(2 L) (gpt2; gptj not)
};

class Gpt2Model : public Model {
 public:
  Gpt2Model(const Gpt2Options& options, const torch::TensorOptions& param_options, const DecoderVariant& variant = {});
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  torch::Tensor logits(const torch::Tensor& input_ids);  // (B, T) -> (B, T, V)
  // (B, T) -> (B, T, C): the decoder's output after its final norm, what Hugging Face's base model (GPT2Model,
  // LlamaModel, ...) returns as last_hidden_state: features for a head of one's own.
  torch::Tensor hidden_states(const torch::Tensor& input_ids);
  // (B, T) -> (B, T, V rounded up as OutputHead pads it); what training computes.
  // position_ids (B, T), for rows that pack several sequences (modelzoo's
  // VSL): each token's position in its own sequence, which alone it attends to.
  torch::Tensor padded_logits(const torch::Tensor& input_ids, const torch::Tensor& position_ids = {});
  double forward_flops_per_token() const override;
  void reset_parameters() override;
  bool is_causal_lm() const override { return true; }
  torch::Tensor next_logits(const torch::Tensor& input_ids, GenerationCache& cache) override;
  int64_t max_positions() const override { return options_.max_position_embeddings; }
  std::optional<int64_t> vocab_size() const override { return options_.vocab_size; }
  std::map<std::string, LrAdjustmentGroup> lr_adjustment_groups() const override;
  // Without MoE's load-balancing term (modelzoo adds it to each sample's score in training).
  torch::Tensor label_log_likelihood(const Features& batch, bool average) override;
  const Gpt2Options& options() const { return options_; }
  // The decoder's input for token ids (modelzoo's compute_input_embeddings):
  // embeddings, their norm, scale and dropout; position_ids as padded_logits'.
  torch::Tensor embed(const torch::Tensor& input_ids, int64_t first_position = 0,
                      const torch::Tensor& position_ids = {});
  // The decoder and the head on input embeddings (B, T, C), as padded_logits;
  // key_mask (B, T) bool hides the keys where it is false (undefined: none).
  torch::Tensor padded_logits_from_embeddings(const torch::Tensor& embeddings, const torch::Tensor& key_mask = {});

  EmbeddingLayer embedding_layer{nullptr};
  LayerNorm embedding_ln_f{nullptr};  // embedding_layer_norm only
  TransformerDecoder transformer_decoder{nullptr};
  OutputHead lm_head{nullptr};

 private:
  // The LM head and the logits scale: (B, T, C) -> (B, T, >= V).
  torch::Tensor head(const torch::Tensor& h);
  // padded_logits, with `moe` holding what MoE layers read and record (their router statistics).
  torch::Tensor padded_logits(const torch::Tensor& input_ids, MoeContext& moe, const torch::Tensor& position_ids);

  Gpt2Options options_;
  DecoderVariant variant_;
};

using Gpt2Spec = TypedModelSpec<Gpt2Options, Gpt2Model>;

ModelFamily gpt2_family();

}  // namespace zoo::models
