// Hugging Face's BERT (model_type bert: BertForPreTraining, or
// BertForMaskedLM without the next-sentence head) <-> zoo's bert family.
// Defines: bert_hf_adapter, roberta_hf_adapter, esm_hf_adapter (hf_esm.cpp).
#pragma once

#include <string>

#include "models/bert/bert.h"
#include "models/common/hf_key_map.h"
#include "models/common/hf_keys.h"
#include "models/registry.h"

namespace zoo::models {

// What the BERT-style Hugging Face layouts (BERT, RoBERTa, ESM) share
// (their layers' linears: map_encoder_layer_linears in models/common/hf_key_map.h).
// The masked-LM head: HF's dense, norm and bias, and the decoder (a tied copy, or zoo's classifier weight).
void map_mlm_head(HfKeyMap& m, const std::string& dense, const std::string& norm, const std::string& bias,
                  const std::string& decoder, bool tied);
// Export checks every BERT-style layout makes: one key/value head per query
// head, sqrt(head dim) scaling, no muP, every bias.
void check_bert_style_export(const ExportCheck& check, const BertOptions& o);

HfAdapter bert_hf_adapter();
// Hugging Face's RoBERTa (RobertaForMaskedLM) <-> zoo's bert with
// disable_nsp and positions counted past padding.
HfAdapter roberta_hf_adapter();
// Hugging Face's ESM (EsmForMaskedLM with rotary positions: ESM-2) <-> zoo's esm2.
HfAdapter esm_hf_adapter();

}  // namespace zoo::models
