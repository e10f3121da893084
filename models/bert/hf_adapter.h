// Hugging Face's BERT (model_type bert: BertForPreTraining, or
// BertForMaskedLM without the next-sentence head) <-> zoo's bert family.
// Defines: bert_hf_adapter, roberta_hf_adapter, esm_hf_adapter (hf_esm.cpp).
#pragma once

#include "models/registry.h"

namespace zoo::models {

HfAdapter bert_hf_adapter();
// Hugging Face's RoBERTa (RobertaForMaskedLM) <-> zoo's bert with
// disable_nsp and positions counted past padding.
HfAdapter roberta_hf_adapter();
// Hugging Face's ESM (EsmForMaskedLM with rotary positions: ESM-2) <-> zoo's esm2.
HfAdapter esm_hf_adapter();

}  // namespace zoo::models
