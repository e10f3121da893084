// Implementation of models/gpt2/hf_adapter.h.
#include "models/gpt2/hf_adapter.h"

#include "models/common/hf_keys.h"
#include "models/gpt2/gpt2.h"

namespace zoo::models {
namespace {

// The decoder options of a spec of this family.
const Gpt2Options& options_of(const ModelSpec& model) {
  const auto* typed = dynamic_cast<const Gpt2Spec*>(&model);
  if (!typed) throw std::invalid_argument("this Hugging Face converter takes a gpt2-family model section");
  return typed->options();
}

// An option that changes the math and that the Hugging Face model type has
// no field for: an error naming the key, never dropped from an export.
void refuse_unrepresentable(const Gpt2Options& o, const std::string& model_type) {
  auto refuse = [&](const std::string& key, const std::string& value) {
    throw std::runtime_error("model." + key + " = " + value + ": Hugging Face's " + model_type +
                             " has no such option; zoo will not export the model without it");
  };
  if (o.embeddings_scale != 1.0) refuse("embeddings_scale", std::to_string(o.embeddings_scale));
  if (o.output_logits_scale && *o.output_logits_scale != 1.0)
    refuse("output_logits_scale", std::to_string(*o.output_logits_scale));
  if (o.scale_qk_dot_by_d) refuse("scale_qk_dot_by_d", "true");
  if (o.scale_qk_dot_by_layer_idx && model_type != "gpt2") refuse("scale_qk_dot_by_layer_idx", "true");
  if (o.embedding_layer_norm) refuse("embedding_layer_norm", "true");
  if (o.norm_type == "biasless-layernorm") refuse("norm_type", o.norm_type);
  if (o.position_embedding_type == "alibi") refuse("position_embedding_type", "alibi");
}

}  // namespace

HfAdapter gpt2_hf_adapter() {
  HfAdapter a;
  a.config_from_hf = [](const nlohmann::json& c) {
    YAML::Node m(YAML::NodeType::Map);
    const int64_t C = c.at("n_embd").get<int64_t>();
    m["vocab_size"] = c.at("vocab_size").get<int64_t>();
    m["hidden_size"] = C;
    m["num_hidden_layers"] = c.at("n_layer").get<int64_t>();
    m["num_heads"] = c.at("n_head").get<int64_t>();
    m["filter_size"] = c.contains("n_inner") && !c["n_inner"].is_null() ? c["n_inner"].get<int64_t>() : 4 * C;
    m["max_position_embeddings"] = c.at("n_positions").get<int64_t>();
    m["position_embedding_type"] = "learned";
    m["share_embedding_weights"] = c.value("tie_word_embeddings", true);
    m["dropout_rate"] = c.value("resid_pdrop", 0.1);
    m["embedding_dropout_rate"] = c.value("embd_pdrop", 0.1);
    m["attention_dropout_rate"] = c.value("attn_pdrop", 0.1);
    m["layer_norm_epsilon"] = c.value("layer_norm_epsilon", 1e-5);
    m["nonlinearity"] = c.value("activation_function", std::string("gelu_new"));
    m["attention_type"] = c.value("scale_attn_weights", true) ? "scaled_dot_product" : "dot_product";
    m["scale_qk_dot_by_layer_idx"] = c.value("scale_attn_by_inverse_layer_idx", false);
    m["use_bias_in_output"] = false;
    m["initializer_range"] = c.value("initializer_range", 0.02);
    m["name"] = "gpt2";
    return m;
  };
  a.config_to_hf = [](const ModelSpec& model) {
    const Gpt2Options& o = options_of(model);
    refuse_unrepresentable(o, "gpt2");
    return nlohmann::json{{"model_type", "gpt2"},
                          {"architectures", {"GPT2LMHeadModel"}},
                          {"vocab_size", o.vocab_size},
                          {"n_embd", o.hidden_size},
                          {"n_layer", o.num_hidden_layers},
                          {"n_head", o.num_heads},
                          {"n_inner", o.filter_size},
                          {"n_positions", o.max_position_embeddings},
                          {"n_ctx", o.max_position_embeddings},
                          {"activation_function", o.nonlinearity},
                          {"resid_pdrop", o.dropout_rate},
                          {"embd_pdrop", o.embedding_dropout_rate.value_or(o.dropout_rate)},
                          {"attn_pdrop", o.attention_dropout_rate.value_or(o.dropout_rate)},
                          {"layer_norm_epsilon", o.layer_norm_epsilon},
                          {"scale_attn_weights", o.attention_type == "scaled_dot_product"},
                          {"scale_attn_by_inverse_layer_idx", o.scale_qk_dot_by_layer_idx},
                          {"tie_word_embeddings", o.share_embedding_weights},
                          {"initializer_range", o.initializer_range}};
  };
  a.from_hf = [](const StateDict& hf_in, const ModelSpec& model) {
    const Gpt2Options& o = options_of(model);
    StateDict hf;
    for (const auto& [k, t] : hf_in) {
      std::string key = k.rfind("transformer.", 0) == 0 ? k.substr(12) : k;
      // Buffers HF keeps for the causal mask carry no weights.
      if (key.find(".attn.bias") != std::string::npos || key.find(".attn.masked_bias") != std::string::npos) continue;
      hf[key] = t;
    }
    StateDict z;
    z["embedding_layer.word_embeddings.weight"] = take_key(hf, "wte.weight");
    z["embedding_layer.position_embeddings.weight"] = take_key(hf, "wpe.weight");
    for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
      const std::string h = "h." + std::to_string(i) + ".", l = "transformer_decoder.layers." + std::to_string(i) + ".";
      for (const char* p : {"weight", "bias"}) {
        z[l + "norm1." + p] = take_key(hf, h + "ln_1." + p);
        z[l + "norm3." + p] = take_key(hf, h + "ln_2." + p);
      }
      // Conv1D stores (in, out): transpose to Linear's (out, in); c_attn holds q, k, v.
      auto qkv_w = take_key(hf, h + "attn.c_attn.weight").t().chunk(3, 0);
      auto qkv_b = take_key(hf, h + "attn.c_attn.bias").chunk(3, 0);
      const char* names[] = {"q", "k", "v"};
      for (int j = 0; j < 3; ++j) {
        z[l + "self_attn.proj_" + names[j] + "_dense_layer.weight"] = qkv_w[j].contiguous();
        z[l + "self_attn.proj_" + names[j] + "_dense_layer.bias"] = qkv_b[j].contiguous();
      }
      z[l + "self_attn.proj_output_dense_layer.weight"] = take_key(hf, h + "attn.c_proj.weight").t().contiguous();
      z[l + "self_attn.proj_output_dense_layer.bias"] = take_key(hf, h + "attn.c_proj.bias");
      z[l + "ffn.ffn.0.linear_layer.weight"] = take_key(hf, h + "mlp.c_fc.weight").t().contiguous();
      z[l + "ffn.ffn.0.linear_layer.bias"] = take_key(hf, h + "mlp.c_fc.bias");
      z[l + "ffn.ffn.1.linear_layer.weight"] = take_key(hf, h + "mlp.c_proj.weight").t().contiguous();
      z[l + "ffn.ffn.1.linear_layer.bias"] = take_key(hf, h + "mlp.c_proj.bias");
    }
    for (const char* p : {"weight", "bias"}) z[std::string("transformer_decoder.norm.") + p] = take_key(hf, std::string("ln_f.") + p);
    if (o.share_embedding_weights) hf.erase("lm_head.weight");  // a copy of wte when present
    else z["lm_head.weight"] = take_key(hf, "lm_head.weight");
    require_consumed(hf, "unexpected Hugging Face keys");
    return z;
  };
  a.to_hf = [](const StateDict& z_in, const ModelSpec& model) {
    const Gpt2Options& o = options_of(model);
    StateDict z = z_in;
    StateDict hf;
    hf["transformer.wte.weight"] = take_key(z, "embedding_layer.word_embeddings.weight");
    hf["transformer.wpe.weight"] = take_key(z, "embedding_layer.position_embeddings.weight");
    for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
      const std::string h = "transformer.h." + std::to_string(i) + ".",
                        l = "transformer_decoder.layers." + std::to_string(i) + ".";
      for (const char* p : {"weight", "bias"}) {
        hf[h + "ln_1." + p] = take_key(z, l + "norm1." + p);
        hf[h + "ln_2." + p] = take_key(z, l + "norm3." + p);
      }
      std::vector<torch::Tensor> w, b;
      for (const char* n : {"q", "k", "v"}) {
        w.push_back(take_key(z, l + "self_attn.proj_" + n + "_dense_layer.weight"));
        b.push_back(take_key(z, l + "self_attn.proj_" + n + "_dense_layer.bias"));
      }
      hf[h + "attn.c_attn.weight"] = torch::cat(w, 0).t().contiguous();
      hf[h + "attn.c_attn.bias"] = torch::cat(b, 0);
      hf[h + "attn.c_proj.weight"] = take_key(z, l + "self_attn.proj_output_dense_layer.weight").t().contiguous();
      hf[h + "attn.c_proj.bias"] = take_key(z, l + "self_attn.proj_output_dense_layer.bias");
      hf[h + "mlp.c_fc.weight"] = take_key(z, l + "ffn.ffn.0.linear_layer.weight").t().contiguous();
      hf[h + "mlp.c_fc.bias"] = take_key(z, l + "ffn.ffn.0.linear_layer.bias");
      hf[h + "mlp.c_proj.weight"] = take_key(z, l + "ffn.ffn.1.linear_layer.weight").t().contiguous();
      hf[h + "mlp.c_proj.bias"] = take_key(z, l + "ffn.ffn.1.linear_layer.bias");
    }
    for (const char* p : {"weight", "bias"})
      hf[std::string("transformer.ln_f.") + p] = take_key(z, std::string("transformer_decoder.norm.") + p);
    if (!o.share_embedding_weights) hf["lm_head.weight"] = take_key(z, "lm_head.weight");
    require_consumed(z, "zoo keys with no Hugging Face name");
    return hf;
  };
  return a;
}

HfAdapter llama_hf_adapter(const std::string& model_type) {
  HfAdapter a;
  a.config_from_hf = [](const nlohmann::json& c) {
    // Fields that change the math: carried, or refused by name, never dropped.
    auto present = [&](const char* key) { return c.contains(key) && !c.at(key).is_null() && c.at(key) != false; };
    for (const char* key : {"rope_scaling", "attention_bias", "mlp_bias"})
      if (present(key))
        throw std::runtime_error(std::string("config.json: ") + key + " = " + c.at(key).dump() +
                                 " changes the model's math and zoo cannot represent it yet");
    if (c.value("hidden_act", std::string("silu")) != "silu")
      throw std::runtime_error("config.json: hidden_act = " + c.at("hidden_act").dump() +
                               ": zoo's LLaMA/Mistral uses silu (SwiGLU) only");
    const int64_t C = c.at("hidden_size").get<int64_t>(), H = c.at("num_attention_heads").get<int64_t>();
    const int64_t G = c.value("num_key_value_heads", H);
    YAML::Node m = rotary_decoder_shape(c, "llama");
    if (present("sliding_window")) m["attention_sliding_window_length"] = c.at("sliding_window").get<int64_t>();
    m["rope_theta"] = c.value("rope_theta", 10000.0);
    m["rotary_dim"] = C / H;
    m["norm_type"] = "rmsnorm";
    m["layer_norm_epsilon"] = c.value("rms_norm_eps", 1e-6);
    m["nonlinearity"] = "swiglu";
    if (G != H) {
      m["attention_module"] = "multiquery_attention";
      m["extra_attention_params"]["num_kv_groups"] = G;
    }
    m["share_embedding_weights"] = c.value("tie_word_embeddings", false);
    m["use_projection_bias_in_attention"] = false;
    m["use_ffn_bias_in_attention"] = false;
    m["use_ffn_bias"] = false;
    m["use_bias_in_output"] = false;
    m["dropout_rate"] = 0.0;
    m["embedding_dropout_rate"] = 0.0;
    m["attention_dropout_rate"] = 0.0;
    m["initializer_range"] = c.value("initializer_range", 0.02);
    return m;
  };
  a.config_to_hf = [model_type](const ModelSpec& model) {
    const Gpt2Options& o = options_of(model);
    refuse_unrepresentable(o, model_type);
    const int64_t G = o.attention_module == "multiquery_attention" ? o.extra_attention_params.num_kv_groups : o.num_heads;
    const bool mistral = model_type == "mistral";
    if (o.attention_sliding_window_length && !mistral)
      throw std::runtime_error("model.attention_sliding_window_length: LLaMA has no sliding window; convert with "
                               "--model mistral");
    nlohmann::json window = o.attention_sliding_window_length ? nlohmann::json(*o.attention_sliding_window_length)
                                                              : nlohmann::json(nullptr);
    nlohmann::json config{{"model_type", model_type},
                          {"architectures", {mistral ? "MistralForCausalLM" : "LlamaForCausalLM"}},
                          {"vocab_size", o.vocab_size},
                          {"hidden_size", o.hidden_size},
                          {"intermediate_size", o.filter_size},
                          {"num_hidden_layers", o.num_hidden_layers},
                          {"num_attention_heads", o.num_heads},
                          {"num_key_value_heads", G},
                          {"max_position_embeddings", o.max_position_embeddings},
                          {"rms_norm_eps", o.layer_norm_epsilon},
                          {"rope_theta", o.rope_theta},
                          {"hidden_act", "silu"},
                          {"tie_word_embeddings", o.share_embedding_weights},
                          {"initializer_range", o.initializer_range}};
    if (mistral) config["sliding_window"] = window;
    return config;
  };
  // One direction's key map; `to_zoo` picks which side the names come from.
  auto convert = [](const StateDict& in, const ModelSpec& model, bool to_zoo) {
    const Gpt2Options& o = options_of(model);
    const int64_t H = o.num_heads, D = o.hidden_size / H;
    const int64_t G = o.attention_module == "multiquery_attention" ? o.extra_attention_params.num_kv_groups : H;
    const int64_t R = o.rotary_dim.value_or(D);
    std::vector<std::pair<std::string, std::string>> names = {  // (hf, zoo)
        {"model.embed_tokens.weight", "embedding_layer.word_embeddings.weight"},
        {"model.norm.weight", "transformer_decoder.norm.weight"}};
    if (!o.share_embedding_weights) names.emplace_back("lm_head.weight", "lm_head.weight");
    for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
      const std::string h = "model.layers." + std::to_string(i) + ".", z = "transformer_decoder.layers." + std::to_string(i) + ".";
      for (const char* p : {"q", "k", "v"})
        names.emplace_back(h + "self_attn." + p + "_proj.weight", z + "self_attn.proj_" + p + "_dense_layer.weight");
      names.emplace_back(h + "self_attn.o_proj.weight", z + "self_attn.proj_output_dense_layer.weight");
      names.emplace_back(h + "input_layernorm.weight", z + "norm1.weight");
      names.emplace_back(h + "post_attention_layernorm.weight", z + "norm3.weight");
      names.emplace_back(h + "mlp.up_proj.weight", z + "ffn.ffn.0.linear_layer.weight");
      names.emplace_back(h + "mlp.gate_proj.weight", z + "ffn.ffn.0.linear_layer_for_glu.weight");
      names.emplace_back(h + "mlp.down_proj.weight", z + "ffn.ffn.1.linear_layer.weight");
    }
    StateDict rest = in, out;
    for (auto it = rest.begin(); it != rest.end();)  // buffers HF rebuilds itself
      it = it->first.find("rotary_emb.inv_freq") != std::string::npos ? rest.erase(it) : std::next(it);
    for (const auto& [hf_name, zoo_name] : names) {
      const std::string& from = to_zoo ? hf_name : zoo_name;
      torch::Tensor t = take_key(rest, from);
      const bool q = hf_name.find("q_proj") != std::string::npos, k = hf_name.find("k_proj") != std::string::npos;
      if (q || k) t = permute_rotary(t, q ? H : G, R, to_zoo);
      out[to_zoo ? zoo_name : hf_name] = t;
    }
    require_consumed(rest, to_zoo ? "unexpected Hugging Face keys" : "zoo keys with no Hugging Face name");
    return out;
  };
  a.from_hf = [convert](const StateDict& hf, const ModelSpec& model) { return convert(hf, model, true); };
  a.to_hf = [convert](const StateDict& z, const ModelSpec& model) { return convert(z, model, false); };
  return a;
}

}  // namespace zoo::models
