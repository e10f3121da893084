// Hugging Face's BERT (model_type bert: BertForPreTraining, or
// BertForMaskedLM without the next-sentence head) <-> zoo's bert family;
// BertForSequenceClassification and BertForTokenClassification <-> zoo's
// bert/classifier and bert/token_classifier (hf_finetune.cpp).
// Defines: bert_hf_adapter, roberta_hf_adapter, esm_hf_adapter (hf_esm.cpp),
// bert_sequence_classifier_hf_adapter, bert_token_classifier_hf_adapter, bert_qa_hf_adapter,
// and the helpers they share.
#pragma once

#include <string>

#include "models/bert/bert.h"
#include "models/hf/hf_key_map.h"
#include "models/hf/hf_keys.h"
#include "models/registry.h"

namespace zoo::models {

// What the BERT-style Hugging Face layouts (BERT, RoBERTa, ESM) share
// (their layers' linears: map_encoder_layer_linears in models/hf/hf_key_map.h).
// The masked-LM head: HF's dense, norm and bias, and the decoder (a tied copy, or zoo's classifier weight).
void map_mlm_head(HfKeyMap& m, const std::string& dense, const std::string& norm, const std::string& bias,
                  const std::string& decoder, bool tied);
// Export checks every BERT-style layout makes: one key/value head per query
// head, sqrt(head dim) scaling, no muP, every bias (the encoder's; and the
// masked-LM head's).
void check_bert_encoder_export(const ExportCheck& check, const BertEncoderOptions& o);
void check_bert_style_export(const ExportCheck& check, const BertOptions& o);

// What HF's BERT and RoBERTa encoders share, for the pre-training and the
// fine-tuning converters (hf_finetune.cpp):
// Export checks of the layout: learned positions (RoBERTa's counted past
// padding), post-norm, a norm on the embeddings, no final norm, and a tanh pooler when there is one.
void check_bert_layout_export(const ExportCheck& check, const BertEncoderOptions& o, bool roberta, bool pooler);
// <hf>embeddings, <hf>encoder.layer.{i} and <hf>pooler.dense (when `pooler`)
// <-> zoo's encoder under `zoo` (bert_encoder. or bert.); token types when `segments` > 0.
void map_bert_encoder(HfKeyMap& m, const BertEncoderOptions& o, const std::string& hf, const std::string& zoo,
                      int64_t segments, bool pooler);
// An export without token types: HF always adds type 0's row, so a zero row (which adds nothing).
void add_missing_token_types(StateDict& hf, const std::string& base, int64_t segments, int64_t width);
// The encoder's `model` keys from a BERT-style config.json (name "bert"), and back.
YAML::Node bert_encoder_shape(const nlohmann::json& config);
nlohmann::json bert_encoder_config(const BertEncoderOptions& o, bool roberta, int64_t segments);
// An input section's WordPiece settings from the checkpoint's directory:
// its vocab.txt, lower-cased when tokenizer_config.json says do_lower_case.
void read_wordpiece_settings(YAML::Node& input, const std::string& hf_dir);

HfAdapter bert_hf_adapter();
// Hugging Face's RoBERTa (RobertaForMaskedLM) <-> zoo's bert with
// disable_nsp and positions counted past padding.
HfAdapter roberta_hf_adapter();
// Hugging Face's ESM (EsmForMaskedLM with rotary positions: ESM-2) <-> zoo's esm2.
HfAdapter esm_hf_adapter();
// modelzoo's bert-sequence-classifier and bert-token-classifier converters.
HfAdapter bert_sequence_classifier_hf_adapter();
HfAdapter bert_token_classifier_hf_adapter();
HfAdapter bert_qa_hf_adapter();

}  // namespace zoo::models
