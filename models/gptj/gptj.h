// GPT-J, GPT-NeoX and Falcon as modelzoo builds them (its gptj model, which
// Falcon's run.py also uses): GPT-2's decoder with attention and FFN in
// parallel off the same input, rotary positions, and GPT-J's own defaults
// and initializers. Defines: GptjOptions, GptjModel, GptjSpec, gptj_family.
#pragma once

#include <optional>
#include <string>

#include "models/gpt2/gpt2.h"

namespace zoo::models {

// Every key of modelzoo's gptj `model` section, with its defaults (which
// differ from gpt2's: rotary positions, no FFN bias, 0.1 dropouts; its
// output_layer_initializer covers the attention output and both FFN layers).
struct GptjOptions : DecoderLmOptions {
  GptjOptions() {
    position_embedding_type = "rotary";
    use_ffn_bias = false;
  }
  bool use_untied_layer_norm = false;  // GPT-NeoX, Falcon 40B: the FFN reads its own norm
  double residual_dropout_rate = 0.1;  // after attention and after the FFN
  double embedding_dropout_rate = 0.1;
  double attention_dropout_rate = 0.1;

  static const config::Schema<GptjOptions>& schema();
  // The same model in GPT-2's terms, and what GPT-2's model does differently.
  Gpt2Options as_gpt2() const;
  DecoderVariant variant() const;
};

class GptjModel : public Gpt2Model {
 public:
  GptjModel(const GptjOptions& options, const torch::TensorOptions& param_options)
      : Gpt2Model(options.as_gpt2(), param_options, options.variant()) {}
};

using GptjSpec = TypedModelSpec<GptjOptions, GptjModel>;

ModelFamily gptj_family();

}  // namespace zoo::models
