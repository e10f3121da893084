// Hugging Face's BERT (model_type bert: BertForPreTraining, or
// BertForMaskedLM without the next-sentence head) <-> zoo's bert family.
// Defines: bert_hf_adapter.
#pragma once

#include "models/registry.h"

namespace zoo::models {

HfAdapter bert_hf_adapter();

}  // namespace zoo::models
