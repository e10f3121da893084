// Hugging Face's ViT (ViTForImageClassification) <-> zoo's vision_transformer.
// Defines: vit_hf_adapter.
#pragma once

#include "models/registry.h"
#include "models/vit/vit.h"

namespace zoo::models {

HfAdapter vit_hf_adapter();

}  // namespace zoo::models
