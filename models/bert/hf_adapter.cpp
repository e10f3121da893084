// Implementation of models/bert/hf_adapter.h.
#include "models/bert/hf_adapter.h"

#include <fstream>

#include "models/bert/bert.h"
#include "models/hf/hf_key_map.h"
#include "models/hf/hf_keys.h"

namespace zoo::models {

void map_mlm_head(HfKeyMap& m, const std::string& dense, const std::string& norm, const std::string& bias,
                  const std::string& decoder, bool tied) {
  m.linear(dense, "bert_mlm_head.mlm_transform.ffn.ffn.0.linear_layer");
  m.norm(norm, "bert_mlm_head.mlm_transform.ln");
  m.tensors.push_back({bias, "bert_mlm_head.classifier.ffn.0.linear_layer.bias"});
  if (tied) m.hf_tied_copies.push_back(decoder + ".weight");
  else m.tensors.push_back({decoder + ".weight", "bert_mlm_head.classifier.ffn.0.linear_layer.weight"});
}

void check_bert_encoder_export(const ExportCheck& check, const BertEncoderOptions& o) {
  check
      .expect(o.attention_module == "aiayn_attention", "attention_module", o.attention_module,
              "has one key/value head per query head")
      .expect(o.attention_type == "scaled_dot_product", "attention_type", o.attention_type, "scales by sqrt(head dim)")
      .expect(!o.mup() && o.embeddings_scale == 1.0 && !o.scale_qk_dot_by_d.value_or(false) &&
                  o.attention_logits_alpha == 1.0,
              "muP keys", "set", "has no muP")
      .expect(o.use_projection_bias_in_attention && o.use_ffn_bias_in_attention && o.use_ffn_bias, "use_*bias*",
              "false", "has every bias");
}

void check_bert_style_export(const ExportCheck& check, const BertOptions& o) {
  check_bert_encoder_export(check, o);
  check.expect(o.use_ffn_bias_in_mlm && o.use_output_bias_in_mlm, "use_*bias_in_mlm", "false", "has every bias");
}

void check_bert_layout_export(const ExportCheck& check, const BertEncoderOptions& o, bool roberta, bool pooler) {
  const std::string act = o.encoder_nonlinearity;
  check
      .expect(o.position_embedding_type == "learned" && o.mask_padding_in_positional_embed == roberta,
              "position_embedding_type",
              o.position_embedding_type + (o.mask_padding_in_positional_embed ? " counted past padding" : ""),
              roberta ? "has learned positions counted past padding (mask_padding_in_positional_embed)"
                      : "has learned absolute positions from 0")
      .expect(!o.norm_first, "norm_first", "true", "normalizes after each residual add")
      .expect(o.embedding_layer_norm, "embedding_layer_norm", "false", "normalizes the embeddings")
      .expect(!o.use_final_layer_norm, "use_final_layer_norm", "true", "has no such option")
      .expect(!pooler || o.pooler_nonlinearity.value_or(act) == "tanh", "pooler_nonlinearity",
              o.pooler_nonlinearity.value_or(act), "pools with tanh");
  check_bert_encoder_export(check, o);
}

void map_bert_encoder(HfKeyMap& m, const BertEncoderOptions& o, const std::string& hf, const std::string& zoo,
                      int64_t segments, bool pooler) {
  const std::string e = zoo + "embedding_layer.";
  m.tensors.push_back({hf + "embeddings.word_embeddings.weight", e + "word_embeddings.weight"});
  m.tensors.push_back({hf + "embeddings.position_embeddings.weight", e + "position_embeddings.weight"});
  if (segments > 0)
    m.tensors.push_back({hf + "embeddings.token_type_embeddings.weight", e + "segment_embeddings.weight"});
  m.norm(hf + "embeddings.LayerNorm", zoo + "embed_ln_f");
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
    const std::string h = hf + "encoder.layer." + std::to_string(i) + ".",
                      z = zoo + "transformer_encoder.layers." + std::to_string(i) + ".";
    map_encoder_layer_linears(m, h, z);
    m.norm(h + "attention.output.LayerNorm", z + "norm1");
    m.norm(h + "output.LayerNorm", z + "norm2");
  }
  if (pooler) m.linear(hf + "pooler.dense", zoo + "pooler.pooler.ffn.0.linear_layer");
}

void add_missing_token_types(StateDict& hf, const std::string& base, int64_t segments, int64_t width) {
  if (segments > 0) return;  // HF always adds token type 0's row: a zero row adds nothing
  const torch::Tensor& words = hf.at(base + "embeddings.word_embeddings.weight");
  hf[base + "embeddings.token_type_embeddings.weight"] = torch::zeros({1, width}, words.options());
}

YAML::Node bert_encoder_shape(const nlohmann::json& c) {
  const std::string positions = c.value("position_embedding_type", "absolute");
  if (positions != "absolute") refuse_config(c, "position_embedding_type", "is not absolute (learned) positions");
  if (c.value("is_decoder", false)) refuse_config(c, "is_decoder", "makes BERT causal; zoo's bert is an encoder");
  YAML::Node m = transformer_shape(c, "bert");
  m["num_segments"] = c.value("type_vocab_size", 2);
  m["encoder_nonlinearity"] = zoo_activation(c, "hidden_act", "gelu");
  m["pooler_nonlinearity"] = "tanh";
  m["dropout_rate"] = c.value("hidden_dropout_prob", 0.1);
  m["attention_dropout_rate"] = c.value("attention_probs_dropout_prob", 0.1);
  m["layer_norm_epsilon"] = c.value("layer_norm_eps", 1e-12);
  m["initializer_range"] = c.value("initializer_range", 0.02);
  m["pad_token_id"] = c.value("pad_token_id", 0);
  return m;
}

nlohmann::json bert_encoder_config(const BertEncoderOptions& o, bool roberta, int64_t segments) {
  // RoBERTa's table holds the positions past padding: pad_token_id + 1 more rows.
  const int64_t positions = o.max_position_embeddings + (roberta ? o.pad_token_id + 1 : 0);
  return nlohmann::json{{"model_type", roberta ? "roberta" : "bert"},
                        {"vocab_size", o.vocab_size},
                        {"hidden_size", o.hidden_size},
                        {"num_hidden_layers", o.num_hidden_layers},
                        {"num_attention_heads", o.num_heads},
                        {"intermediate_size", o.filter_size},
                        {"hidden_act", o.encoder_nonlinearity},
                        {"hidden_dropout_prob", o.dropout_rate},
                        {"attention_probs_dropout_prob", o.attention_dropout_rate.value_or(o.dropout_rate)},
                        {"max_position_embeddings", positions},
                        {"type_vocab_size", std::max<int64_t>(1, segments)},
                        {"initializer_range", o.initializer_range},
                        {"layer_norm_eps", o.layer_norm_epsilon},
                        {"pad_token_id", o.pad_token_id},
                        {"position_embedding_type", "absolute"}};
}

void read_wordpiece_settings(YAML::Node& input, const std::string& hf_dir) {
  input["vocab_file"] = hf_dir + "/vocab.txt";
  std::ifstream tokenizer(hf_dir + "/tokenizer_config.json");
  if (!tokenizer) return;
  const nlohmann::json t = nlohmann::json::parse(tokenizer, nullptr, /*allow_exceptions=*/false);
  if (t.is_object() && t.value("do_lower_case", false)) input["do_lower"] = true;  // uncased checkpoints
}

namespace {

const BertOptions& options_of(const ModelSpec& model) {
  return spec_options<BertSpec>(model, "the bert Hugging Face converter takes a bert model section");
}

// Where HF's BERT and RoBERTa keep their tensors: the encoder under
// `base` (bert. / roberta.), the masked-LM head under cls.predictions
// (BERT) or lm_head (RoBERTa).
struct HfLayout {
  std::string base, mlm_dense, mlm_norm, mlm_bias, mlm_decoder;
};
const HfLayout kBert{"bert.", "cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
                     "cls.predictions.bias", "cls.predictions.decoder"};
const HfLayout kRoberta{"roberta.", "lm_head.dense", "lm_head.layer_norm", "lm_head.bias", "lm_head.decoder"};

// HF's names for zoo's: <base>embeddings / <base>encoder.layer.{i} / <base>pooler and the heads.
HfKeyMap bert_keys(const BertOptions& o, const HfLayout& l) {
  HfKeyMap m;
  m.hf_prefix = l.base;
  m.hf_buffers = {"embeddings.position_ids", "embeddings.token_type_ids"};
  // The decoder is tied to the word embeddings and its bias is the head's bias.
  m.hf_tied_copies = {l.mlm_decoder + ".bias"};
  map_bert_encoder(m, o, l.base, "bert_encoder.", o.segments(), !o.disable_nsp);
  map_mlm_head(m, l.mlm_dense, l.mlm_norm, l.mlm_bias, l.mlm_decoder, o.share_embedding_weights);
  if (!o.disable_nsp) m.linear("cls.seq_relationship", "bert_cls_head.classifier.ffn.0.linear_layer");
  return m;
}

// What HF's BERT (RoBERTa) computes and zoo's bert can also be set to compute otherwise.
void refuse_unrepresentable(const BertOptions& o, bool roberta) {
  const ExportCheck check(roberta ? "roberta" : "bert");
  const std::string act = o.encoder_nonlinearity;
  check.expect(!roberta || o.disable_nsp, "disable_nsp", "false", "has no next-sentence head")
      .expect(o.mlm_nonlinearity.value_or(act) == (roberta ? "gelu" : act), "mlm_nonlinearity",
              o.mlm_nonlinearity.value_or(act),
              roberta ? "applies gelu in the masked-LM head" : "applies hidden_act in the masked-LM head too")
      .expect(o.use_ffn_bias_in_mlm && o.use_output_bias_in_mlm, "use_*bias_in_mlm", "false", "has every bias");
  check_bert_layout_export(check, o, roberta, /*pooler=*/!o.disable_nsp);
}

// The `model` keys both config.json kinds give.
YAML::Node encoder_shape(const nlohmann::json& c) {
  YAML::Node m = bert_encoder_shape(c);
  m["share_embedding_weights"] = c.value("tie_word_embeddings", true);
  return m;
}

nlohmann::json config_of(const BertOptions& o, bool roberta) {
  refuse_unrepresentable(o, roberta);
  nlohmann::json c = bert_encoder_config(o, roberta, o.segments());
  c["architectures"] = {roberta ? "RobertaForMaskedLM" : o.disable_nsp ? "BertForMaskedLM" : "BertForPreTraining"};
  c["tie_word_embeddings"] = o.share_embedding_weights;
  return c;
}

StateDict to_hf(const StateDict& zoo, const BertOptions& o, const HfLayout& layout) {
  StateDict hf = map_to_hf(bert_keys(o, layout), zoo);
  add_missing_token_types(hf, layout.base, o.segments(), o.hidden_size);
  return hf;
}

// Fine-tuning reads modelzoo's BERT CSV data, tokenized with the checkpoint's vocab.txt.
YAML::Node csv_input(const nlohmann::json&, const YAML::Node& model, const std::string& hf_dir) {
  YAML::Node in(YAML::NodeType::Map);
  in["data_processor"] = "BertCSVDynamicMaskDataProcessor";
  read_wordpiece_settings(in, hf_dir);
  in["max_sequence_length"] = std::min<int64_t>(128, model["max_position_embeddings"].as<int64_t>());
  in["max_predictions_per_seq"] = 20;
  if (model["disable_nsp"] && model["disable_nsp"].as<bool>()) in["disable_nsp"] = true;
  return in;
}

}  // namespace

HfAdapter bert_hf_adapter() {
  HfAdapter a;
  a.model_types = {"bert"};
  // Fine-tuned checkpoints go to the fine-tuning families' converters (hf_finetune.cpp).
  a.claims = [](const nlohmann::json& c) {
    const std::string arch = hf_architecture(c);
    return arch != "BertForSequenceClassification" && arch != "BertForTokenClassification" &&
           arch != "BertForQuestionAnswering";
  };
  a.config_from_hf = encoder_shape;
  // A checkpoint without the next-sentence head (BertForMaskedLM) converts to masked LM only.
  a.config_from_weights = [](YAML::Node& model, const StateDict& hf) {
    const bool nsp = hf.count("cls.seq_relationship.weight") > 0;
    model["disable_nsp"] = !nsp;
    if (!nsp) model.remove("pooler_nonlinearity");
  };
  a.config_to_hf = [](const ModelSpec& spec) { return config_of(options_of(spec), false); };
  a.from_hf = [](const StateDict& hf, const ModelSpec& m) { return map_to_zoo(bert_keys(options_of(m), kBert), hf); };
  a.to_hf = [](const StateDict& zoo, const ModelSpec& m) { return to_hf(zoo, options_of(m), kBert); };
  a.key_map = [](const ModelSpec& m) { return bert_keys(options_of(m), kBert); };
  a.input_from_hf = csv_input;
  return a;
}

HfAdapter roberta_hf_adapter() {
  HfAdapter a;
  a.model_types = {"roberta"};
  a.config_from_hf = [](const nlohmann::json& c) {
    YAML::Node m = encoder_shape(c);
    // Positions count past padding: the table's first pad_token_id + 1 rows are not positions 0, 1, ...
    const int64_t pad = c.value("pad_token_id", 1);
    m["pad_token_id"] = pad;
    m["max_position_embeddings"] = c.at("max_position_embeddings").get<int64_t>() - pad - 1;
    m["mask_padding_in_positional_embed"] = true;
    m["disable_nsp"] = true;
    m["mlm_nonlinearity"] = "gelu";  // RobertaLMHead's, whatever hidden_act says
    m["layer_norm_epsilon"] = c.value("layer_norm_eps", 1e-5);
    m.remove("pooler_nonlinearity");
    return m;
  };
  a.config_to_hf = [](const ModelSpec& spec) { return config_of(options_of(spec), true); };
  a.from_hf = [](const StateDict& hf, const ModelSpec& m) {
    return map_to_zoo(bert_keys(options_of(m), kRoberta), hf);
  };
  a.to_hf = [](const StateDict& zoo, const ModelSpec& m) { return to_hf(zoo, options_of(m), kRoberta); };
  // RoBERTa's BPE is not WordPiece: the fine-tuning params read token ids (BertMlmDataProcessor's HDF5 windows).
  a.input_from_hf = [](const nlohmann::json& c, const YAML::Node& model, const std::string&) {
    YAML::Node in(YAML::NodeType::Map);
    in["data_processor"] = "BertMlmDataProcessor";
    in["max_sequence_length"] = std::min<int64_t>(128, model["max_position_embeddings"].as<int64_t>());
    in["vocab_size"] = c.at("vocab_size").get<int64_t>();
    in["disable_nsp"] = true;
    in["cls_id"] = c.value("bos_token_id", 0);
    in["sep_id"] = c.value("eos_token_id", 2);
    in["pad_id"] = c.value("pad_token_id", 1);
    in["mask_id"] = c.at("vocab_size").get<int64_t>() - 1;  // <mask> is RoBERTa's last token
    return in;
  };
  return a;
}

}  // namespace zoo::models
