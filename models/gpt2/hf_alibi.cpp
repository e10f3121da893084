// Hugging Face BLOOM and MPT <-> zoo's gpt2 family: the ALiBi models whose
// slopes HF computes instead of storing. Import adds zoo's slopes (the
// paper's, which both use); export checks the model still has them.
#include <cmath>
#include <iostream>

#include "models/common/embedding.h"
#include "models/gpt2/hf_adapter.h"
#include "models/hf/hf_keys.h"

namespace zoo::models {
namespace {

const char* kSlopes = "embedding_layer.position_embed_helper.slopes";

// `a` (key-mapped) plus the slopes HF leaves out of its checkpoint.
HfAdapter with_computed_slopes(HfAdapter a, const std::string& model_type) {
  a.from_hf = [from_hf = a.from_hf](const StateDict& hf, const ModelSpec& model) {
    const int64_t H = gpt2_options_of(model).num_heads;
    StateDict z = from_hf(hf, model);
    z[kSlopes] = torch::tensor(alibi_slopes(H), torch::kDouble).to(torch::kFloat).view({H, 1});
    return z;
  };
  a.to_hf = [to_hf = a.to_hf, model_type](const StateDict& z_in, const ModelSpec& model) {
    StateDict z = z_in;
    torch::Tensor slopes = take_key(z, kSlopes).to(torch::kDouble).view({-1});
    torch::Tensor fixed = torch::tensor(alibi_slopes(gpt2_options_of(model).num_heads), torch::kDouble);
    if (!torch::allclose(slopes, fixed, /*rtol=*/1e-6, /*atol=*/0))
      throw std::runtime_error(std::string(kSlopes) +
                               ": the model's ALiBi slopes were trained away from the fixed ones "
                               "Hugging Face's " +
                               model_type + " computes; zoo will not export the model without them");
    return to_hf(z, model);
  };
  return a;
}

HfKeyMap bloom_keys(const Gpt2Options& o) {
  HfKeyMap m;
  m.qkv = qkv_shape(o);
  m.hf_prefix = "transformer.";  // BloomModel checkpoints (bloom-560m) have none
  m.tensors.push_back({"transformer.word_embeddings.weight", "embedding_layer.word_embeddings.weight"});
  m.norm("transformer.word_embeddings_layernorm", "embedding_ln_f");
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".", z = zoo_layer(i);
    m.norm(h + "input_layernorm", z + "norm1");
    m.fused_qkv(h + "self_attention.query_key_value", z + "self_attn.", QkvLayout::kPerGroup);
    m.linear(h + "self_attention.dense", z + "self_attn.proj_output_dense_layer");
    m.norm(h + "post_attention_layernorm", z + "norm3");
    m.linear(h + "mlp.dense_h_to_4h", z + "ffn.ffn.0.linear_layer");
    m.linear(h + "mlp.dense_4h_to_h", z + "ffn.ffn.1.linear_layer");
  }
  m.norm("transformer.ln_f", "transformer_decoder.norm");
  m.lm_head(o.share_embedding_weights);
  return m;
}

HfKeyMap mpt_keys(const Gpt2Options& o) {
  HfKeyMap m;
  m.qkv = qkv_shape(o);
  m.hf_prefix = "transformer.";
  m.tensors.push_back({"transformer.wte.weight", "embedding_layer.word_embeddings.weight"});
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
    const std::string h = "transformer.blocks." + std::to_string(i) + ".", z = zoo_layer(i);
    m.norm(h + "norm_1", z + "norm1");
    m.fused_qkv(h + "attn.Wqkv", z + "self_attn.", QkvLayout::kBlocks);
    m.linear(h + "attn.out_proj", z + "self_attn.proj_output_dense_layer");
    m.norm(h + "norm_2", z + "norm3");
    m.linear(h + "ffn.up_proj", z + "ffn.ffn.0.linear_layer");
    m.linear(h + "ffn.down_proj", z + "ffn.ffn.1.linear_layer");
  }
  m.norm("transformer.norm_f", "transformer_decoder.norm");
  m.lm_head(/*tied=*/true);  // MPT always ties its head
  return m;
}

}  // namespace

// BLOOM: GPT-2's sequential layer with a norm after the embeddings, ALiBi,
// query_key_value laid out per head, and GELU's tanh approximation.
HfAdapter bloom_hf_adapter() {
  HfAdapter a;
  a.model_types = {"bloom"};
  a.config_from_hf = [](const nlohmann::json& c) {
    if (c.value("apply_residual_connection_post_layernorm", false))
      refuse_config(c, "apply_residual_connection_post_layernorm",
                    "(the residual taken after the norm) is not zoo's layer");
    const int64_t C = config_get<int64_t>(c, {"hidden_size", "n_embed"});
    YAML::Node m(YAML::NodeType::Map);
    m["name"] = "gpt2";
    m["vocab_size"] = c.at("vocab_size").get<int64_t>();
    m["hidden_size"] = C;
    m["num_hidden_layers"] = config_get<int64_t>(c, {"n_layer", "num_hidden_layers"});
    m["num_heads"] = config_get<int64_t>(c, {"n_head", "num_attention_heads"});
    m["filter_size"] = 4 * C;
    // ALiBi has no table to size; BLOOM was trained on 2048 tokens.
    m["max_position_embeddings"] = config_get<int64_t>(c, {"seq_length", "max_position_embeddings"}, 2048);
    m["position_embedding_type"] = "alibi";
    m["embedding_layer_norm"] = true;
    m["share_embedding_weights"] = c.value("tie_word_embeddings", true);
    m["layer_norm_epsilon"] = c.value("layer_norm_epsilon", 1e-5);
    m["nonlinearity"] = "gelu_new";  // HF's bloom_gelu: the tanh approximation
    m["dropout_rate"] = c.value("hidden_dropout", 0.0);
    m["attention_dropout_rate"] = c.value("attention_dropout", 0.0);
    m["embedding_dropout_rate"] = 0.0;
    m["use_bias_in_output"] = false;
    m["initializer_range"] = c.value("initializer_range", 0.02);
    return m;
  };
  a.config_to_hf = [](const ModelSpec& model) {
    const Gpt2Options& o = gpt2_options_of(model);
    refuse_unrepresentable(o, "bloom", HfHas{.alibi = true, .embedding_norm = true, .learned_positions = false});
    expect_mha(o, "bloom");
    ExportCheck("bloom")
        .expect(o.position_embedding_type == "alibi", "position_embedding_type", o.position_embedding_type,
                "uses ALiBi")
        .expect(o.embedding_layer_norm, "embedding_layer_norm", "false", "always has the embedding norm")
        .expect(o.filter_size == 4 * o.hidden_size, "filter_size", std::to_string(o.filter_size),
                "has 4 x hidden_size");
    expect_gpt2_biases(o, "bloom");
    ExportCheck("bloom")
        .expect(o.attention_type == "scaled_dot_product", "attention_type", o.attention_type,
                "scales by sqrt(head dim)")
        .expect(o.nonlinearity == "gelu" || o.nonlinearity == "gelu_new" || o.nonlinearity == "gelu_fast",
                "nonlinearity", o.nonlinearity, "uses GELU");
    if (o.nonlinearity == "gelu")  // modelzoo's BLOOM configs say gelu; its converter exports them the same way
      std::cerr << "warning: model.nonlinearity = gelu (exact) exports as BLOOM's tanh-approximated GELU; the two "
                   "differ by at most 4.7e-4 per activation\n";
    return nlohmann::json{{"model_type", "bloom"},
                          {"architectures", {"BloomForCausalLM"}},
                          {"vocab_size", o.vocab_size},
                          {"hidden_size", o.hidden_size},
                          {"n_layer", o.num_hidden_layers},
                          {"n_head", o.num_heads},
                          {"seq_length", o.max_position_embeddings},
                          {"layer_norm_epsilon", o.layer_norm_epsilon},
                          {"apply_residual_connection_post_layernorm", false},
                          {"hidden_dropout", o.dropout_rate},
                          {"attention_dropout", o.attention_dropout_rate.value_or(o.dropout_rate)},
                          {"tie_word_embeddings", o.share_embedding_weights},
                          {"initializer_range", o.initializer_range}};
  };
  return with_computed_slopes(key_mapped(a, gpt2_options_of, bloom_keys), "bloom");
}

// MPT: biasless LayerNorm and projections, ALiBi, Wqkv as [q; k; v], exact
// GELU, a tied head. attn_config options HF's MPT does not compute (or that
// change the slopes) are refused by name.
HfAdapter mpt_hf_adapter() {
  HfAdapter a;
  a.model_types = {"mpt"};
  a.config_from_hf = [](const nlohmann::json& c) {
    const nlohmann::json attn = c.value("attn_config", nlohmann::json::object());
    const int64_t C = c.at("d_model").get<int64_t>(), H = c.at("n_heads").get<int64_t>();
    auto refuse_attn = [&](const std::string& key, const std::string& why) {
      refuse_config(attn, key, why, "attn_config");
    };
    if (!attn.value("alibi", true)) refuse_attn("alibi", "(learned positions) is not what Hugging Face's mpt computes");
    if (attn.value("attn_type", std::string("multihead_attention")) != "multihead_attention")
      refuse_attn("attn_type", "is not the multi-head attention Hugging Face's mpt computes");
    if (attn.contains("kv_n_heads") && attn.at("kv_n_heads") != c.at("n_heads"))
      refuse_attn("kv_n_heads", "(grouped key/value heads) is not in Hugging Face's mpt");
    if (config_sets(attn, "rope")) refuse_attn("rope", "(rotary positions) is not in Hugging Face's mpt");
    const std::string norm = c.value("norm_type", std::string("low_precision_layernorm"));
    if (norm != "layernorm" && norm != "low_precision_layernorm")
      refuse_config(c, "norm_type", "is not the LayerNorm Hugging Face's mpt computes");
    if (c.contains("ffn_config") && c.at("ffn_config").value("ffn_type", std::string("mptmlp")) != "mptmlp")
      refuse_config(c.at("ffn_config"), "ffn_type", "is not MPT's GELU MLP", "ffn_config");
    if (attn.value("alibi_bias_max", 8) != 8)
      refuse_attn("alibi_bias_max", "changes the ALiBi slopes from the paper's");
    for (const char* key : {"clip_qkv", "qk_ln", "prefix_lm", "attn_uses_sequence_id"})
      if (config_sets(attn, key)) refuse_attn(key, "changes the attention and zoo has no such option");
    if (attn.contains("softmax_scale") && !attn.at("softmax_scale").is_null() &&
        std::abs(attn.at("softmax_scale").get<double>() * std::sqrt(double(C / H)) - 1.0) > 1e-9)
      refuse_attn("softmax_scale", "is not 1/sqrt(head dim)");
    if (!c.value("no_bias", true)) refuse_config(c, "no_bias", "(biases) is not Hugging Face's mpt");
    if (c.value("embedding_fraction", 1.0) != 1.0) refuse_config(c, "embedding_fraction", "changes the gradients");
    if (config_sets(c, "logit_scale")) refuse_config(c, "logit_scale", "is not in Hugging Face's mpt");
    YAML::Node m(YAML::NodeType::Map);
    m["name"] = "gpt2";
    m["vocab_size"] = c.at("vocab_size").get<int64_t>();
    m["hidden_size"] = C;
    m["num_hidden_layers"] = c.at("n_layers").get<int64_t>();
    m["num_heads"] = H;
    m["filter_size"] = c.value("expansion_ratio", 4) * C;
    m["max_position_embeddings"] = c.value("max_seq_len", 2048);
    m["position_embedding_type"] = "alibi";
    m["norm_type"] = "biasless-layernorm";
    m["share_embedding_weights"] = true;
    m["layer_norm_epsilon"] = c.value("layer_norm_epsilon", 1e-5);
    m["nonlinearity"] = "gelu";
    for (const char* key :
         {"use_projection_bias_in_attention", "use_ffn_bias_in_attention", "use_ffn_bias", "use_bias_in_output"})
      m[key] = false;
    m["dropout_rate"] = c.value("resid_pdrop", 0.0);
    m["embedding_dropout_rate"] = c.value("emb_pdrop", 0.0);
    m["attention_dropout_rate"] = attn.value("attn_pdrop", 0.0);
    m["initializer_range"] = c.value("initializer_range", 0.02);
    return m;
  };
  a.config_to_hf = [](const ModelSpec& model) {
    const Gpt2Options& o = gpt2_options_of(model);
    refuse_unrepresentable(o, "mpt", HfHas{.alibi = true, .biasless_norm = true, .learned_positions = false});
    expect_mha(o, "mpt");
    ExportCheck("mpt")
        .expect(o.position_embedding_type == "alibi", "position_embedding_type", o.position_embedding_type,
                "uses ALiBi")
        .expect(o.norm_type == "biasless-layernorm", "norm_type", o.norm_type, "has LayerNorm without bias")
        .expect(!o.use_projection_bias_in_attention && !o.use_ffn_bias_in_attention && !o.use_ffn_bias &&
                    !o.use_bias_in_output,
                "use_*bias*", "true", "has no biases")
        .expect(o.filter_size % o.hidden_size == 0, "filter_size", std::to_string(o.filter_size),
                "has a whole expansion_ratio x d_model")
        .expect(o.share_embedding_weights, "share_embedding_weights", "false", "always ties its head")
        .expect(o.attention_type == "scaled_dot_product", "attention_type", o.attention_type,
                "scales by sqrt(head dim)")
        .expect(o.nonlinearity == "gelu", "nonlinearity", o.nonlinearity, "uses exact GELU");
    return nlohmann::json{{"model_type", "mpt"},
                          {"architectures", {"MptForCausalLM"}},
                          {"vocab_size", o.vocab_size},
                          {"d_model", o.hidden_size},
                          {"n_layers", o.num_hidden_layers},
                          {"n_heads", o.num_heads},
                          {"expansion_ratio", o.filter_size / o.hidden_size},
                          {"max_seq_len", o.max_position_embeddings},
                          {"layer_norm_epsilon", o.layer_norm_epsilon},
                          {"no_bias", true},
                          {"resid_pdrop", o.dropout_rate},
                          {"emb_pdrop", o.embedding_dropout_rate.value_or(o.dropout_rate)},
                          {"attn_config",
                           {{"alibi", true},
                            {"alibi_bias_max", 8},
                            {"attn_pdrop", o.attention_dropout_rate.value_or(o.dropout_rate)},
                            {"softmax_scale", nullptr},
                            {"clip_qkv", nullptr},
                            {"qk_ln", false}}},
                          {"initializer_range", o.initializer_range}};
  };
  return with_computed_slopes(key_mapped(a, gpt2_options_of, mpt_keys), "mpt");
}

}  // namespace zoo::models
