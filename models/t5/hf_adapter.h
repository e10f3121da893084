// Hugging Face's T5 (model_type t5: T5ForConditionalGeneration, v1.0 with
// ReLU and tied embeddings, or gated ReLU / SiLU and an untied head) <->
// zoo's t5 family. Defines: t5_hf_adapter.
#pragma once

#include "models/registry.h"

namespace zoo::models {

HfAdapter t5_hf_adapter();

}  // namespace zoo::models
