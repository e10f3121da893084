// Hugging Face GPT-2 and LLaMA / Mistral <-> zoo: config.json <-> `model` section and state-dict
// key maps (Conv1D weights transposed, c_attn split into q/k/v), as the
// reference's gpt2_hf_cs and llama converters do. Defines: gpt2_hf_adapter,
// llama_hf_adapter.
#pragma once

#include "models/registry.h"

namespace zoo::models {

HfAdapter gpt2_hf_adapter();
// LLaMA and Mistral (model_type "llama" or "mistral": Mistral adds the
// sliding window): q/k rows re-ordered per head for modelzoo's interleaved
// rotary layout. config.json fields that change the math and that zoo cannot
// represent (rope_scaling, attention_bias, ...) are an error naming them.
HfAdapter llama_hf_adapter(const std::string& model_type);

}  // namespace zoo::models
