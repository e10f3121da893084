// Hugging Face GPT-NeoX <-> zoo's gptj family: config.json <-> `model`
// section (rotary_pct, rotary_emb_base/rope_theta, use_parallel_residual
// carried or refused) and the key map (query_key_value split per head into
// q/k/v, q/k rows re-ordered for modelzoo's interleaved rotary).
// Defines: neox_hf_adapter.
#pragma once

#include "models/registry.h"

namespace zoo::models {

HfAdapter neox_hf_adapter();

}  // namespace zoo::models
