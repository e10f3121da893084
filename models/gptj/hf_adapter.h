// Hugging Face GPT-NeoX, GPT-J, CodeGen and Falcon <-> zoo's gptj family
// (parallel attention and FFN): config.json <-> `model` section, and each
// model type's checkpoint layout as an HfKeyMap. NeoX and Falcon fuse q/k/v
// per key/value group and half-split the rotary dims (re-ordered for zoo's
// interleaved layout); GPT-J keeps q/k/v apart and interleaves as zoo does;
// CodeGen is GPT-J with q/v/k fused in 4 model-parallel shards. Fields that
// change the math are carried or refused by name.
// Defines: neox_hf_adapter, gptj_hf_adapter, falcon_hf_adapter.
#pragma once

#include "models/registry.h"

namespace zoo::models {

HfAdapter neox_hf_adapter();
HfAdapter gptj_hf_adapter(const std::string& model_type);  // "gptj" or "codegen"
HfAdapter falcon_hf_adapter();

}  // namespace zoo::models
