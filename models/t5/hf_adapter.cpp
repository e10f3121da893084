// Implementation of models/t5/hf_adapter.h.
#include "models/t5/hf_adapter.h"

#include "models/hf/hf_key_map.h"
#include "models/hf/hf_keys.h"
#include "models/t5/t5.h"

namespace zoo::models {
namespace {

const T5Options& options_of(const ModelSpec& model) {
  return spec_options<TypedModelSpec<T5Options, T5Model>>(model,
                                                          "the t5 Hugging Face converter takes a t5 model section");
}

// HF's feed_forward_proj <-> modelzoo's nonlinearity. HF's gated-gelu gates
// with GELU's tanh approximation: zoo's geglu_tanh, not modelzoo's geglu
// (the exact GELU, which modelzoo's converter maps it to).
const std::vector<std::pair<std::string, std::string>> kFeedForward = {{"relu", "relu"},
                                                                       {"gelu", "gelu"},
                                                                       {"gated-relu", "reglu"},
                                                                       {"gated-silu", "swiglu"},
                                                                       {"gated-gelu", "geglu_tanh"}};

// HF's names for zoo's: {encoder,decoder}.block.{i}.layer.{j}, shared, lm_head.
HfKeyMap t5_keys(const T5Options& o) {
  HfKeyMap m;
  m.hf_tied_copies = {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"};
  m.tensors.push_back({"shared.weight", "encoder_embeddings.word_embeddings.weight"});
  const bool glu = is_glu(o.encoder_nonlinearity);
  auto attention = [&](const std::string& h, const std::string& z) {
    m.tensors.push_back({h + ".q.weight", z + ".proj_q_dense_layer.weight"});
    m.tensors.push_back({h + ".k.weight", z + ".proj_k_dense_layer.weight"});
    m.tensors.push_back({h + ".v.weight", z + ".proj_v_dense_layer.weight"});
    m.tensors.push_back({h + ".o.weight", z + ".proj_output_dense_layer.weight"});
  };
  auto feed_forward = [&](const std::string& h, const std::string& z) {
    if (glu) {  // HF's wi_0 is the gate (activated), wi_1 the linear half
      m.tensors.push_back({h + ".wi_0.weight", z + ".ffn.0.linear_layer_for_glu.weight"});
      m.tensors.push_back({h + ".wi_1.weight", z + ".ffn.0.linear_layer.weight"});
    } else {
      m.tensors.push_back({h + ".wi.weight", z + ".ffn.0.linear_layer.weight"});
    }
    m.tensors.push_back({h + ".wo.weight", z + ".ffn.1.linear_layer.weight"});
  };
  for (const std::string stack : {"encoder", "decoder"}) {
    const bool decoder = stack == "decoder";
    const int64_t layers = decoder ? o.decoder_layers() : o.encoder_num_hidden_layers;
    m.tensors.push_back({stack + ".block.0.layer.0.SelfAttention.relative_attention_bias.weight",
                         stack + "_embeddings.position_embed_helper.relative_attention_bias.weight"});
    for (int64_t i = 0; i < layers; ++i) {
      const std::string h = stack + ".block." + std::to_string(i) + ".layer.",
                        z = stack + ".layers." + std::to_string(i);
      attention(h + "0.SelfAttention", z + ".self_attn");
      m.tensors.push_back({h + "0.layer_norm.weight", z + ".norm1.weight"});
      if (decoder) {
        attention(h + "1.EncDecAttention", z + ".multihead_attn");
        m.tensors.push_back({h + "1.layer_norm.weight", z + ".norm2.weight"});
      }
      feed_forward(h + (decoder ? "2" : "1") + ".DenseReluDense", z + ".ffn");
      m.tensors.push_back(
          {h + (decoder ? "2" : "1") + ".layer_norm.weight", z + (decoder ? ".norm3" : ".norm2") + ".weight"});
    }
    m.tensors.push_back({stack + ".final_layer_norm.weight", stack + ".norm.weight"});
  }
  m.lm_head(o.share_embedding_weights);
  return m;
}

YAML::Node config_from_hf(const nlohmann::json& c) {
  const std::string proj = c.value("feed_forward_proj", "relu");
  std::string nonlinearity;
  for (const auto& [hf, zoo] : kFeedForward)
    if (hf == proj) nonlinearity = zoo;
  if (nonlinearity.empty())
    refuse_config(c, "feed_forward_proj", "is not relu, gelu, gated-relu, gated-silu or gated-gelu");
  if (c.value("relative_attention_max_distance", 128) != 128)
    refuse_config(c, "relative_attention_max_distance", "is not 128, modelzoo's fixed distance");
  YAML::Node m(YAML::NodeType::Map);
  m["name"] = "t5";
  m["src_vocab_size"] = c.at("vocab_size").get<int64_t>();  // its sentinels included
  m["d_model"] = c.at("d_model").get<int64_t>();
  m["d_kv"] = c.at("d_kv").get<int64_t>();
  m["d_ff"] = c.at("d_ff").get<int64_t>();
  m["encoder_num_hidden_layers"] = c.at("num_layers").get<int64_t>();
  m["decoder_num_hidden_layers"] = config_get<int64_t>(c, {"num_decoder_layers", "num_layers"});
  m["num_heads"] = c.at("num_heads").get<int64_t>();
  m["relative_attention_num_buckets"] = c.value("relative_attention_num_buckets", 32);
  m["norm_type"] = "rmsnorm";
  m["layer_norm_epsilon"] = c.value("layer_norm_epsilon", 1e-6);
  m["dropout_rate"] = c.value("dropout_rate", 0.1);
  m["initializer_factor"] = c.value("initializer_factor", 1.0);
  m["encoder_nonlinearity"] = m["decoder_nonlinearity"] = nonlinearity;
  m["position_embedding_type"] = "relative";
  const bool tied = c.value("tie_word_embeddings", true);
  // transformers scales the decoder's output by d_model^-1/2 when
  // scale_decoder_outputs says so, and reads tie_word_embeddings in its place
  // for configs without it; zoo's t5, as modelzoo's, scales exactly when the
  // head is tied.
  const bool says_scale = c.contains("scale_decoder_outputs") && !c.at("scale_decoder_outputs").is_null();
  if (says_scale && config_sets(c, "scale_decoder_outputs") != tied)
    refuse_config(c, "scale_decoder_outputs",
                  std::string("differs from tie_word_embeddings (") + (tied ? "true" : "false") +
                      "): zoo's t5 scales the decoder output by d_model^-1/2 exactly when the head is tied");
  m["share_embedding_weights"] = tied;
  m["share_encoder_decoder_embedding"] = true;
  return m;
}

nlohmann::json config_of(const T5Options& o) {
  const ExportCheck check("t5");
  std::string proj;
  for (const auto& [hf, zoo] : kFeedForward)
    if (zoo == o.encoder_nonlinearity) proj = hf;
  check
      .expect(!proj.empty() && o.decoder_nonlinearity == o.encoder_nonlinearity, "encoder_nonlinearity",
              o.encoder_nonlinearity + " / " + o.decoder_nonlinearity,
              "has one of relu, gelu, gated-relu, gated-silu, gated-gelu (geglu_tanh) for both stacks")
      .expect(o.norm_type == "rmsnorm", "norm_type", o.norm_type, "normalizes with RMSNorm")
      .expect(o.position_embedding_type.value_or("none") == "relative", "position_embedding_type",
              o.position_embedding_type.value_or("null"), "has relative position buckets only")
      .expect(o.use_pre_encoder_decoder_layer_norm, "use_pre_encoder_decoder_layer_norm", "false", "is pre-norm")
      .expect(!o.use_pre_encoder_decoder_dropout, "use_pre_encoder_decoder_dropout", "true", "has no such dropout")
      .expect(!o.use_projection_bias_in_attention && !o.use_ffn_bias, "use_*bias*", "true", "has no biases")
      .expect(o.share_encoder_decoder_embedding, "share_encoder_decoder_embedding", "false",
              "shares one embedding table")
      .expect(!o.use_transformer_initialization && !o.mup_base_d_model && !o.mup_base_d_ff &&
                  o.embeddings_alpha == 1.0 && o.encoder_attention_logits_alpha == 1.0 &&
                  o.decoder_attention_logits_alpha == 1.0,
              "use_transformer_initialization / muP keys", "set", "leaves its scores and embeddings unscaled");
  return nlohmann::json{{"model_type", "t5"},
                        {"architectures", {"T5ForConditionalGeneration"}},
                        {"vocab_size", o.source_vocab()},
                        {"d_model", o.d_model},
                        {"d_kv", o.d_kv},
                        {"d_ff", o.d_ff},
                        {"num_layers", o.encoder_num_hidden_layers},
                        {"num_decoder_layers", o.decoder_layers()},
                        {"num_heads", o.num_heads},
                        {"relative_attention_num_buckets", o.relative_attention_num_buckets},
                        {"relative_attention_max_distance", 128},
                        {"dropout_rate", o.dropout_rate},
                        {"layer_norm_epsilon", o.layer_norm_epsilon},
                        {"initializer_factor", o.initializer_factor},
                        {"feed_forward_proj", proj},
                        {"tie_word_embeddings", o.share_embedding_weights},
                        {"scale_decoder_outputs", o.share_embedding_weights},
                        {"is_encoder_decoder", true},
                        {"pad_token_id", 0},
                        {"eos_token_id", 1},
                        {"decoder_start_token_id", 0}};
}

// Fine-tuning reads T5DynamicDataProcessor's text: pieces of T5's
// sentencepiece vocabulary, listed one per line in vocab.txt (spiece.model
// has them), its 100 sentinels after them; T5 starts decoding from <pad>.
YAML::Node t5_input(const nlohmann::json&, const YAML::Node&, const std::string& hf_dir) {
  YAML::Node in(YAML::NodeType::Map);
  in["data_processor"] = "T5DynamicDataProcessor";
  in["src_vocab_file"] = hf_dir + "/vocab.txt";
  in["src_data_dir"] = "./data/train";  // the converter names train and eval data apart
  in["extra_ids"] = 100;
  in["src_max_sequence_length"] = 512;
  in["tgt_max_sequence_length"] = 114;
  in["sos_token"] = "<pad>";
  return in;
}

}  // namespace

HfAdapter t5_hf_adapter() {
  HfAdapter a;
  a.model_types = {"t5"};
  a.config_from_hf = config_from_hf;
  a.config_to_hf = [](const ModelSpec& spec) { return config_of(options_of(spec)); };
  a.input_from_hf = t5_input;
  return key_mapped(a, options_of, t5_keys);
}

}  // namespace zoo::models
