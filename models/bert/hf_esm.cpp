// Hugging Face's ESM (EsmForMaskedLM: ESM-2, rotary positions) <-> zoo's esm2.
#include <cmath>

#include "models/bert/hf_adapter.h"

namespace zoo::models {
namespace {

const Esm2Options& esm_options_of(const ModelSpec& model) {
  return spec_options<Esm2Spec>(model, "the esm Hugging Face converter takes an esm2 model section");
}

int64_t head_dim(const Esm2Options& o) { return o.hidden_size / o.num_heads; }

// HF's names for zoo's: esm.embeddings / esm.encoder.layer.{i} (a norm before
// attention and one before the FFN) / esm.encoder.emb_layer_norm_after, and lm_head.
HfKeyMap esm_keys(const Esm2Options& o) {
  HfKeyMap m;
  m.hf_prefix = "esm.";
  m.qkv = {o.num_heads, o.num_heads, head_dim(o)};
  m.half_split_rotary_dim = head_dim(o);  // HF's rotate_half over the whole head
  // Rebuilt at load: positions, rotary frequencies; the contact-prediction head is not part of the masked LM.
  m.hf_buffers = {"embeddings.position_ids", "rotary_embeddings.inv_freq", "contact_head."};
  m.hf_tied_copies = {"lm_head.decoder.bias"};
  const std::string e = "bert_encoder.";
  m.tensors.push_back({"esm.embeddings.word_embeddings.weight", e + "embedding_layer.word_embeddings.weight"});
  if (o.embedding_layer_norm) m.norm("esm.embeddings.layer_norm", e + "embed_ln_f");
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
    const std::string h = "esm.encoder.layer." + std::to_string(i) + ".",
                      z = e + "transformer_encoder.layers." + std::to_string(i) + ".";
    map_encoder_layer_linears(m, h, z);
    m.norm(h + "attention.LayerNorm", z + "norm1");  // pre-norm: before attention, and before the FFN
    m.norm(h + "LayerNorm", z + "norm2");
  }
  m.norm("esm.encoder.emb_layer_norm_after", e + "transformer_encoder.norm");
  map_mlm_head(m, "lm_head.dense", "lm_head.layer_norm", "lm_head.bias", "lm_head.decoder", o.share_embedding_weights);
  return m;
}

YAML::Node esm_model(const nlohmann::json& c) {
  if (c.value("is_folding_model", false)) refuse_config(c, "is_folding_model", "is ESMFold, not a masked LM");
  const std::string positions = c.value("position_embedding_type", "absolute");
  if (positions != "rotary")
    refuse_config(c, "position_embedding_type", "is not rotary (ESM-1b's absolute positions are not supported)");
  const int64_t C = c.at("hidden_size").get<int64_t>(), H = c.at("num_attention_heads").get<int64_t>();
  YAML::Node m(YAML::NodeType::Map);
  m["name"] = "esm2";
  m["vocab_size"] = c.at("vocab_size").get<int64_t>();
  m["hidden_size"] = C;
  m["num_hidden_layers"] = c.at("num_hidden_layers").get<int64_t>();
  m["num_heads"] = H;
  m["filter_size"] = c.at("intermediate_size").get<int64_t>();
  m["max_position_embeddings"] = c.at("max_position_embeddings").get<int64_t>();
  m["position_embedding_type"] = "rotary";
  m["rotary_dim"] = C / H;
  m["norm_first"] = true;
  m["embedding_layer_norm"] = c.value("emb_layer_norm_before", false);
  m["use_final_layer_norm"] = true;
  m["token_dropout"] = c.value("token_dropout", false);
  if (c.contains("mask_token_id") && c.at("mask_token_id").is_number_integer())
    m["mask_token_id"] = c.at("mask_token_id").get<int64_t>();
  m["pad_token_id"] = c.value("pad_token_id", 1);
  m["disable_nsp"] = true;
  m["encoder_nonlinearity"] = zoo_activation(c, "hidden_act", "gelu");
  m["mlm_nonlinearity"] = "gelu";  // EsmLMHead's, whatever hidden_act says
  m["dropout_rate"] = c.value("hidden_dropout_prob", 0.0);
  m["attention_dropout_rate"] = c.value("attention_probs_dropout_prob", 0.0);
  m["layer_norm_epsilon"] = c.value("layer_norm_eps", 1e-5);
  m["initializer_range"] = c.value("initializer_range", 0.02);
  m["share_embedding_weights"] = c.value("tie_word_embeddings", true);
  return m;
}

nlohmann::json esm_config(const Esm2Options& o) {
  const ExportCheck check("esm");
  const std::string act = o.encoder_nonlinearity;
  check
      .expect(o.position_embedding_type == "rotary" && o.rotary_dim.value_or(head_dim(o) / 4) == head_dim(o) &&
                  o.rope_theta == 10000.0,
              "position_embedding_type", o.position_embedding_type,
              "rotates whole heads with rotary base 10000 (rotary_dim = hidden_size / num_heads)")
      .expect(o.norm_first, "norm_first", "false", "normalizes before attention and the FFN")
      .expect(o.use_final_layer_norm, "use_final_layer_norm", "false", "normalizes the last layer's output")
      .expect(o.disable_nsp, "disable_nsp", "false", "has no next-sentence head")
      .expect(o.mlm_nonlinearity.value_or(act) == "gelu", "mlm_nonlinearity", o.mlm_nonlinearity.value_or(act),
              "applies gelu in the masked-LM head");
  check_bert_style_export(check, o);
  nlohmann::json c{{"model_type", "esm"},
                   {"architectures", {"EsmForMaskedLM"}},
                   {"vocab_size", o.vocab_size},
                   {"hidden_size", o.hidden_size},
                   {"num_hidden_layers", o.num_hidden_layers},
                   {"num_attention_heads", o.num_heads},
                   {"intermediate_size", o.filter_size},
                   {"hidden_act", act},
                   {"hidden_dropout_prob", o.dropout_rate},
                   {"attention_probs_dropout_prob", o.attention_dropout_rate.value_or(o.dropout_rate)},
                   {"max_position_embeddings", o.max_position_embeddings},
                   {"initializer_range", o.initializer_range},
                   {"layer_norm_eps", o.layer_norm_epsilon},
                   {"position_embedding_type", "rotary"},
                   {"emb_layer_norm_before", o.embedding_layer_norm},
                   {"token_dropout", o.token_dropout},
                   {"pad_token_id", o.pad_token_id},
                   {"is_folding_model", false},
                   {"tie_word_embeddings", o.share_embedding_weights}};
  if (o.mask_token_id) c["mask_token_id"] = *o.mask_token_id;
  return c;
}

}  // namespace

HfAdapter esm_hf_adapter() {
  HfAdapter a;
  a.model_types = {"esm"};
  a.config_from_hf = esm_model;
  a.config_to_hf = [](const ModelSpec& spec) { return esm_config(esm_options_of(spec)); };
  // Fine-tuning reads modelzoo's masked-LM HDF5 (its preprocessing with the checkpoint's tokenizer).
  a.input_from_hf = [](const nlohmann::json&, const YAML::Node&, const std::string&) {
    YAML::Node in(YAML::NodeType::Map);
    in["data_processor"] = "BertHDF5DataProcessor";
    return in;
  };
  return key_mapped(a, esm_options_of, esm_keys);
}

}  // namespace zoo::models
