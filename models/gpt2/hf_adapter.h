// Hugging Face GPT-2 and LLaMA <-> zoo: config.json <-> `model` section and state-dict
// key maps (Conv1D weights transposed, c_attn split into q/k/v), as the
// reference's gpt2_hf_cs and llama converters do. Defines: gpt2_hf_adapter,
// llama_hf_adapter.
#pragma once

#include "models/registry.h"

namespace zoo::models {

HfAdapter gpt2_hf_adapter();
// LLaMA: q/k rows re-ordered per head for modelzoo's interleaved rotary layout.
HfAdapter llama_hf_adapter();

}  // namespace zoo::models
