// Implementation of models/gptj/gptj.h.
#include "models/gptj/gptj.h"

#include "models/gptj/hf_adapter.h"
#include "models/hf/headless.h"

namespace zoo::models {

const config::Schema<GptjOptions>& GptjOptions::schema() {
  using O = GptjOptions;
  auto dropout = config::in_range(0.0, 1.0, /*hi_open=*/true);
  static const config::Schema<O> s =
      add_decoder_lm_fields(
          config::Schema<O>("model (gptj)",
                            "GPT-J / GPT-NeoX / Falcon: parallel attention and FFN, as modelzoo's gptj model."))
          .field("use_untied_layer_norm", &O::use_untied_layer_norm,
                 "The FFN reads its own norm (norm3) of the layer input instead of the attention's (GPT-NeoX).")
          .field("residual_dropout_rate", &O::residual_dropout_rate, "Dropout after attention and after the FFN.",
                 dropout)
          .field("embedding_dropout_rate", &O::embedding_dropout_rate, "Dropout after the embeddings.", dropout)
          .field("attention_dropout_rate", &O::attention_dropout_rate, "Dropout on attention probabilities.", dropout)
          .ignored({"dropout_rate"},
                   "modelzoo's gptj model does not read it; residual_dropout_rate is the decoder's "
                   "dropout")
          .field("output_layer_initializer", &O::output_layer_initializer,
                 "Initializer of the attention output and, unless ffn_initializer / ffn_output_layer_initializer "
                 "say otherwise, both FFN layers (null: truncated_normal std=initializer_range, +-2 std).")
          .validate([](const O& o, const auto& fail) { check_decoder_lm_options(o, fail); });
  return s;
}

Gpt2Options GptjOptions::as_gpt2() const {
  Gpt2Options g;
  static_cast<DecoderLmOptions&>(g) = *this;
  g.dropout_rate = residual_dropout_rate;
  g.embedding_dropout_rate = embedding_dropout_rate;
  g.attention_dropout_rate = attention_dropout_rate;
  // modelzoo's gptj defaults every initializer to the plain truncated normal
  // (GPT-2 scales the output layers' by depth), and both FFN layers to the
  // output layers' (before muP scales them apart).
  const InitializerSpec plain = truncated_normal_spec(initializer_range);
  g.initializer = initializer.value_or(plain);
  g.embedding_initializer = embedding_initializer.value_or(plain);
  g.output_layer_initializer = output_layer_initializer.value_or(plain);
  g.ffn_initializer = ffn_initializer.value_or(*g.output_layer_initializer);
  g.ffn_output_layer_initializer = ffn_output_layer_initializer.value_or(*g.output_layer_initializer);
  return g;
}

DecoderVariant GptjOptions::variant() const {
  DecoderVariant v;
  v.parallel_residual = true;
  v.untied_norms = use_untied_layer_norm;
  v.mup_depth_scaling = false;  // modelzoo's gptj scales its output layers by width only
  return v;
}

ModelFamily gptj_family() {
  ModelFamily f = make_model_family<GptjOptions, GptjModel>(
      "gptj", {"gpt-neox", "gpt_neox", "neox", "falcon"},
      "GPT-J / GPT-NeoX / Falcon as modelzoo's gptj model builds them: attention and FFN in parallel off the layer "
      "input (one shared norm, or untied norms with use_untied_layer_norm), rotary positions.",
      {"input_ids", "attention_mask", "labels"}, kPackedSequenceFeatures);
  f.hf["gpt-neox"] = neox_hf_adapter();  // modelzoo's converter name (Hugging Face's model_type: gpt_neox)
  f.hf["gpt_neox"] = f.hf["gpt-neox"];
  f.hf["gptj"] = gptj_hf_adapter("gptj");
  f.hf["codegen"] = gptj_hf_adapter("codegen");
  f.hf["falcon"] = falcon_hf_adapter();
  add_headless_converters(f, {"gpt-neox", "gptj", "codegen", "falcon"},
                          decoder_lm_head_parts([](const ModelSpec& m) -> const DecoderLmOptions& {
                            return spec_options<GptjSpec>(m, "a headless gptj-family converter takes a gptj model");
                          }));
  return f;
}

}  // namespace zoo::models
