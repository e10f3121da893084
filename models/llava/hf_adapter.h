// Hugging Face's LLaVA (LlavaForConditionalGeneration, model_type llava:
// llava-hf/llava-1.5-7b-hf and its kind) <-> zoo's llava: the CLIP vision
// tower (vision_tower.vision_model.*) is the ViTModel image tower, the
// multi_modal_projector's linear_1 / act / linear_2 the projector, the
// language model (language_model.*) a LLaMA or Mistral decoder converted by
// the gpt2 family's converter. The same checkpoints convert to modelzoo's
// multimodal_simple layout too (its converter name: mmsimple-llava): one
// tower, the projector as the global image projection.
// Defines: llava_hf_adapter, mmsimple_llava_hf_adapter.
#pragma once

#include "models/registry.h"

namespace zoo::models {

HfAdapter llava_hf_adapter();
HfAdapter mmsimple_llava_hf_adapter();

}  // namespace zoo::models
