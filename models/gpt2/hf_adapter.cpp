// Implementation of models/gpt2/hf_adapter.h: the helpers, GPT-2, BTLM, LLaMA, Mistral and Mixtral.
#include "models/gpt2/hf_adapter.h"

#include <set>

#include "models/hf/hf_keys.h"

namespace zoo::models {

const Gpt2Options& gpt2_options_of(const ModelSpec& model) {
  return spec_options<Gpt2Spec>(model, "this Hugging Face converter takes a gpt2-family model section");
}

QkvShape qkv_shape(const DecoderLmOptions& o) {
  const int64_t H = o.num_heads;
  return {H, o.attention_module == "multiquery_attention" ? o.extra_attention_params.num_kv_groups : H,
          o.attention_inner_dim.value_or(o.hidden_size) / H};
}

void refuse_unrepresentable(const Gpt2Options& o, const std::string& model_type, const HfHas& has) {
  const ExportCheck check(model_type);
  const std::string no = "has no such option";
  const std::string& pos = o.position_embedding_type;
  check
      .expect(has.mup || has.embeddings_scale || o.embeddings_scale == 1.0, "embeddings_scale",
              std::to_string(o.embeddings_scale), no)
      .expect(has.mup || !o.output_logits_scale || *o.output_logits_scale == 1.0, "output_logits_scale",
              std::to_string(o.output_logits_scale.value_or(1.0)), no)
      .expect(has.mup || !o.scale_qk_dot_by_d, "scale_qk_dot_by_d", "true", no)
      .expect(!o.mup_base_hidden_size && !o.mup_base_filter_size, "mup_base_*", "set", "has no muP base widths")
      .expect(has.gemma2 || o.attention_logits_alpha == 1.0, "attention_logits_alpha",
              std::to_string(o.attention_logits_alpha), no)
      .expect(has.qk_norm || !o.attention_qk_norm_layer, "attention_qk_norm_layer",
              o.attention_qk_norm_layer.value_or(""), "normalizes no queries and keys")
      .expect(!o.attention_sink_tokens, "attention_sink_tokens", std::to_string(o.attention_sink_tokens.value_or(0)),
              no)
      .expect(has.gemma2 || (!o.attention_logit_softcapping && !o.final_logit_softcapping && !o.norm_first_sandwich &&
                             !o.sliding_window_every_other_decoder_layer),
              "Gemma 2's options", "set", "is not Gemma 2")
      .expect(has.head_dim || o.attention_inner_dim.value_or(o.hidden_size) == o.hidden_size, "attention_inner_dim",
              std::to_string(o.attention_inner_dim.value_or(0)), "has q/k/v as wide as hidden_size")
      .expect(has.layer_idx_scaling || !o.scale_qk_dot_by_layer_idx, "scale_qk_dot_by_layer_idx", "true", no)
      .expect(has.embedding_norm || !o.embedding_layer_norm, "embedding_layer_norm", "true", no)
      .expect((pos == "alibi" && has.alibi) || (pos == "learned" && has.learned_positions) ||
                  (pos == "rotary" && has.rotary),
              "position_embedding_type", pos, "has other position embeddings")
      .expect(o.norm_type == (has.rms_norm ? "rmsnorm" : "layernorm") ||
                  (has.biasless_norm && o.norm_type == "biasless-layernorm"),
              "norm_type", o.norm_type, "has other norms")
      .expect(!is_glu(o.nonlinearity) || has.gated_ffn, "nonlinearity", o.nonlinearity, "has no gated FFN")
      .expect((o.pos_scaling_factor == 1.0 && o.pos_scaling_type == "linear") ||
                  (has.rope_scaling && (o.pos_scaling_type == "linear" || o.pos_scaling_type == "llama3")),
              "pos_scaling_*", o.pos_scaling_type + " x" + std::to_string(o.pos_scaling_factor),
              has.rope_scaling ? "converts linear and llama3 rope_scaling only" : "has no position scaling");
}

HfKeyMap gpt2_layout(const Gpt2Options& o, bool conv1d) {
  HfKeyMap m;
  m.qkv = qkv_shape(o);
  m.hf_prefix = "transformer.";
  m.hf_buffers = {".attn.bias", ".attn.masked_bias"};  // causal-mask buffers
  m.tensors.push_back({"transformer.wte.weight", "embedding_layer.word_embeddings.weight"});
  if (o.position_embedding_type == "learned")
    m.tensors.push_back({"transformer.wpe.weight", "embedding_layer.position_embeddings.weight"});
  if (o.position_embedding_type == "alibi")  // BTLM keeps its slopes; zoo too
    m.tensors.push_back({"transformer.relative_pe.slopes", "embedding_layer.position_embed_helper.slopes"});
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".", z = zoo_layer(i);
    m.norm(h + "ln_1", z + "norm1");
    m.norm(h + "ln_2", z + "norm3");
    m.linear(h + "attn.c_proj", z + "self_attn.proj_output_dense_layer", conv1d);
    m.linear(h + "mlp.c_fc", z + "ffn.ffn.0.linear_layer", conv1d);
    if (is_glu(o.nonlinearity)) m.linear(h + "mlp.c_fc2", z + "ffn.ffn.0.linear_layer_for_glu", conv1d);  // BTLM
    m.linear(h + "mlp.c_proj", z + "ffn.ffn.1.linear_layer", conv1d);
  }
  m.norm("transformer.ln_f", "transformer_decoder.norm");
  m.lm_head(o.share_embedding_weights);
  return m;
}

namespace {

// GPT-2's map with its fused, Conv1D c_attn (all q, then k, then v).
HfKeyMap gpt2_keys(const Gpt2Options& o) {
  HfKeyMap m = gpt2_layout(o, /*conv1d=*/true);
  for (int64_t i = 0; i < o.num_hidden_layers; ++i)
    m.fused_qkv("transformer.h." + std::to_string(i) + ".attn.c_attn", zoo_layer(i) + "self_attn.", QkvLayout::kBlocks,
                true);
  return m;
}

}  // namespace

// The `model` keys every GPT-2-style config.json (n_embd, n_layer, ...) gives.
YAML::Node gpt2_shape(const nlohmann::json& c, const std::string& default_activation) {
  YAML::Node m(YAML::NodeType::Map);
  const int64_t C = c.at("n_embd").get<int64_t>();
  m["name"] = "gpt2";
  m["vocab_size"] = c.at("vocab_size").get<int64_t>();
  m["hidden_size"] = C;
  m["num_hidden_layers"] = c.at("n_layer").get<int64_t>();
  m["num_heads"] = c.at("n_head").get<int64_t>();
  m["filter_size"] = config_get<int64_t>(c, {"n_inner"}, 4 * C);
  m["max_position_embeddings"] = c.at("n_positions").get<int64_t>();
  m["position_embedding_type"] = "learned";
  m["share_embedding_weights"] = c.value("tie_word_embeddings", true);
  m["dropout_rate"] = c.value("resid_pdrop", 0.1);
  m["embedding_dropout_rate"] = c.value("embd_pdrop", 0.1);
  m["attention_dropout_rate"] = c.value("attn_pdrop", 0.1);
  m["layer_norm_epsilon"] = c.value("layer_norm_epsilon", 1e-5);
  if (default_activation != "swiglu") m["nonlinearity"] = zoo_activation(c, "activation_function", default_activation);
  m["attention_type"] = c.value("scale_attn_weights", true) ? "scaled_dot_product" : "dot_product";
  m["scale_qk_dot_by_layer_idx"] = c.value("scale_attn_by_inverse_layer_idx", false);
  m["use_bias_in_output"] = false;
  m["initializer_range"] = c.value("initializer_range", 0.02);
  return m;
}

nlohmann::json gpt2_config(const Gpt2Options& o, const std::string& model_type, const std::string& architecture) {
  return nlohmann::json{{"model_type", model_type},
                        {"architectures", {architecture}},
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
}

// The GPT-2 layout's model is dense: every projection has its bias, the head none.
void expect_gpt2_biases(const Gpt2Options& o, const std::string& model_type) {
  ExportCheck(model_type)
      .expect(o.use_projection_bias_in_attention && o.use_ffn_bias_in_attention && o.use_ffn_bias, "use_*bias*",
              "false", "has a bias on every projection")
      .expect(!o.use_bias_in_output, "use_bias_in_output", "true", "has no LM-head bias");
}

void expect_mha(const DecoderLmOptions& o, const std::string& model_type) {
  ExportCheck(model_type)
      .expect(o.attention_module != "multiquery_attention", "attention_module", o.attention_module,
              "has multi-head attention only");
}

HfAdapter gpt2_hf_adapter() {
  HfAdapter a;
  a.model_types = {"gpt2"};
  a.claims = [](const nlohmann::json& c) {
    return c.value("attention_head_type", std::string("multihead")) == "multihead";
  };
  a.config_from_hf = [](const nlohmann::json& c) { return gpt2_shape(c, "gelu_new"); };
  a.config_to_hf = [](const ModelSpec& model) {
    const Gpt2Options& o = gpt2_options_of(model);
    refuse_unrepresentable(o, "gpt2", HfHas{.layer_idx_scaling = true});
    ExportCheck("gpt2").expect(o.attention_module != "multiquery_attention", "attention_module", o.attention_module,
                               "has multi-head attention only (convert with --model santacoder or starcoder)");
    expect_gpt2_biases(o, "gpt2");
    return gpt2_config(o, "gpt2", "GPT2LMHeadModel");
  };
  return key_mapped(a, gpt2_options_of, gpt2_keys);
}

// BTLM and Jais (Cerebras' and Inception's remote-code models, one layout):
// GPT-2's layout with SwiGLU (mlp.c_fc2 is the gate), ALiBi with stored
// slopes, and muP: embeddings times mup_embeddings_scale, scores / head dim,
// logits times mup_output_alpha x mup_width_scale (zoo's
// output_logits_scale; the width also scales the decoder's learning rate, as
// modelzoo's converter sets it).
HfAdapter btlm_hf_adapter(const std::string& model_type) {
  HfAdapter a;
  a.model_types = {model_type};
  a.config_from_hf = [](const nlohmann::json& c) {
    YAML::Node m = gpt2_shape(c, "swiglu");
    const std::string act = c.value("activation_function", std::string("swiglu"));
    m["nonlinearity"] = act == "swiglu" ? act : zoo_activation(c, "activation_function", act);
    const std::string pos = c.value("position_embedding_type", std::string("learned"));
    if (pos != "alibi" && pos != "learned") refuse_config(c, "position_embedding_type", "is not alibi or learned");
    if (config_sets(c, "alibi_scaling"))
      refuse_config(c, "alibi_scaling", "(ALiBi position interpolation) is not in zoo");
    m["position_embedding_type"] = pos;
    m["embeddings_scale"] = c.value("mup_embeddings_scale", 1.0);
    m["output_logits_scale"] = c.value("mup_output_alpha", 1.0) * c.value("mup_width_scale", 1.0);
    m["scale_qk_dot_by_d"] = c.value("mup_scale_qk_dot_by_d", false);
    return m;
  };
  a.optimizer_from_hf = [](const nlohmann::json& c) {
    YAML::Node opt(YAML::NodeType::Map);
    if (c.contains("mup_width_scale"))
      opt["adjust_learning_rate"]["decoder_kernel"] = c.at("mup_width_scale").get<double>();
    return opt;
  };
  a.config_to_hf = [model_type](const ModelSpec& model) {
    const Gpt2Options& o = gpt2_options_of(model);
    refuse_unrepresentable(o, model_type,
                           HfHas{.alibi = true, .mup = true, .layer_idx_scaling = true, .gated_ffn = true});
    expect_gpt2_biases(o, model_type);
    expect_mha(o, model_type);
    const bool jais = model_type == "jais";
    nlohmann::json c = gpt2_config(o, model_type, jais ? "JAISLMHeadModel" : "BTLMLMHeadModel");
    // The logits scale goes whole into mup_output_alpha: the product is what the forward uses.
    c["position_embedding_type"] = o.position_embedding_type;
    c["mup_width_scale"] = 1.0;
    c["mup_output_alpha"] = o.output_logits_scale.value_or(1.0);
    c["mup_embeddings_scale"] = o.embeddings_scale;
    c["mup_scale_qk_dot_by_d"] = o.scale_qk_dot_by_d;
    c["alibi_scaling"] = nullptr;
    // The remote code HF's Auto classes load (the repositories modelzoo's converters name).
    const std::string code = jais ? "inceptionai/jais-30b-v3--" : "cerebras/btlm-3b-8k-base--";
    const std::string module = jais ? "jais" : "btlm", prefix = jais ? "JAIS" : "BTLM";
    c["auto_map"] = {{"AutoConfig", code + "configuration_" + module + "." + prefix + "Config"},
                     {"AutoModel", code + "modeling_" + module + "." + prefix + "Model"},
                     {"AutoModelForCausalLM", code + "modeling_" + module + "." + prefix + "LMHeadModel"}};
    return c;
  };
  return key_mapped(a, gpt2_options_of, gpt2_keys);
}

HfKeyMap llama_layout(const Gpt2Options& o, double norm_offset) {
  HfKeyMap m;
  m.qkv = qkv_shape(o);
  m.half_split_rotary_dim = o.rotary_dim.value_or(m.qkv.head_dim);
  m.hf_buffers = {"rotary_emb.inv_freq"};
  m.tensors.push_back({"model.embed_tokens.weight", "embedding_layer.word_embeddings.weight"});
  m.norm("model.norm", "transformer_decoder.norm", norm_offset);
  m.lm_head(o.share_embedding_weights);
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
    const std::string h = "model.layers." + std::to_string(i) + ".", z = zoo_layer(i);
    for (const char* p : {"q", "k", "v"})
      m.linear(h + "self_attn." + p + "_proj", z + "self_attn.proj_" + p + "_dense_layer");
    m.linear(h + "self_attn.o_proj", z + "self_attn.proj_output_dense_layer");
    m.norm(h + "input_layernorm", z + "norm1", norm_offset);
  }
  return m;
}

nlohmann::json llama_config(const Gpt2Options& o, const std::string& model_type, const std::string& architecture) {
  const int64_t head = qkv_shape(o).head_dim, rotary = o.rotary_dim.value_or(o.hidden_size / o.num_heads);
  ExportCheck(model_type)
      .expect(rotary == head, "rotary_dim", std::to_string(rotary),
              "rotates the whole head (" + std::to_string(head) + " dims)");
  return nlohmann::json{{"model_type", model_type},
                        {"architectures", {architecture}},
                        {"vocab_size", o.vocab_size},
                        {"hidden_size", o.hidden_size},
                        {"intermediate_size", o.filter_size},
                        {"num_hidden_layers", o.num_hidden_layers},
                        {"num_attention_heads", o.num_heads},
                        {"num_key_value_heads", qkv_shape(o).kv_heads},
                        {"head_dim", qkv_shape(o).head_dim},
                        {"max_position_embeddings", o.max_position_embeddings},
                        {"rms_norm_eps", o.layer_norm_epsilon},
                        {"rope_theta", o.rope_theta},
                        {"rope_scaling", rope_scaling(o)},
                        {"tie_word_embeddings", o.share_embedding_weights},
                        {"initializer_range", o.initializer_range}};
}

YAML::Node llama_shape(const nlohmann::json& c, const std::string& family, std::optional<int64_t> default_head_dim) {
  const int64_t C = c.at("hidden_size").get<int64_t>(), H = c.at("num_attention_heads").get<int64_t>();
  const int64_t G = c.value("num_key_value_heads", H);
  YAML::Node m = rotary_decoder_shape(c, family);
  read_rope(c, m);
  // Mistral NeMo, Gemma and others set head_dim apart from hidden_size / heads.
  const int64_t head_dim = config_get<int64_t>(c, {"head_dim"}, default_head_dim.value_or(C / H));
  if (head_dim * H != C) m["attention_inner_dim"] = head_dim * H;
  m["rotary_dim"] = head_dim;
  m["norm_type"] = "rmsnorm";
  m["layer_norm_epsilon"] = c.value("rms_norm_eps", 1e-6);
  if (G != H) {
    m["attention_module"] = "multiquery_attention";
    m["extra_attention_params"]["num_kv_groups"] = G;
  }
  m["use_ffn_bias"] = false;
  m["use_bias_in_output"] = false;
  m["dropout_rate"] = 0.0;
  m["embedding_dropout_rate"] = 0.0;
  m["initializer_range"] = c.value("initializer_range", 0.02);
  return m;
}

void map_llama_mlp(HfKeyMap& m, const std::string& h, const std::string& z) {
  m.linear(h + "mlp.up_proj", z + "ffn.ffn.0.linear_layer");
  m.linear(h + "mlp.gate_proj", z + "ffn.ffn.0.linear_layer_for_glu");
  m.linear(h + "mlp.down_proj", z + "ffn.ffn.1.linear_layer");
}

// LLaMA's rotary base and scaling (Llama 3.1's llama3, or linear), either
// transformers' layout, as modelzoo's rope_theta and pos_scaling_* keys of `m`.
void read_rope(const nlohmann::json& c, YAML::Node& m) {
  const HfRope rope = read_hf_rope(c, {"rope_theta"}, 10000.0);
  m["rope_theta"] = rope.theta;
  if (rope.partial_rotary_factor && *rope.partial_rotary_factor != 1.0)
    refuse_config(c, rope.field, "rotates part of each head (partial_rotary_factor), which this model type does not");
  if (rope.scaling.is_null()) return;
  const nlohmann::json& r = rope.scaling;
  const std::string type = r.value("rope_type", r.value("type", std::string("default")));
  std::set<std::string> known = {"rope_type", "type", "factor"};
  if (type == "llama3") known.insert({"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"});
  if (type != "linear" && type != "llama3")
    refuse_config(c, rope.field, "changes the model's math and is not one zoo converts (linear and llama3 are)");
  for (const auto& [key, value] : r.items())
    if (!known.count(key))
      refuse_config(c, rope.field, "changes the model's math: zoo does not convert `" + key + "` for " + type);
  m["pos_scaling_type"] = type;
  m["pos_scaling_factor"] = r.at("factor").get<double>();
  if (type == "llama3")
    for (const char* key : {"original_max_position_embeddings", "low_freq_factor", "high_freq_factor"})
      if (r.contains(key)) m["pos_scaling_extra_args"][key] = YAML::Load(r.at(key).dump());
}

// The rope_scaling config.json field of `o` (null: none).
nlohmann::json rope_scaling(const Gpt2Options& o) {
  if (o.pos_scaling_type == "linear" && o.pos_scaling_factor == 1.0) return nullptr;
  nlohmann::json r{{"rope_type", o.pos_scaling_type}, {"factor", o.pos_scaling_factor}};
  if (o.pos_scaling_type == "llama3") {
    const PosScalingExtraArgs e = o.pos_scaling_extra_args.value_or(PosScalingExtraArgs{});
    const RotaryOptions defaults;  // modelzoo's llama3 defaults, kept in one place
    r["original_max_position_embeddings"] =
        e.original_max_position_embeddings.value_or(defaults.original_max_position_embeddings);
    r["low_freq_factor"] = e.low_freq_factor.value_or(defaults.low_freq_factor);
    r["high_freq_factor"] = e.high_freq_factor.value_or(defaults.high_freq_factor);
  }
  return r;
}

namespace {

// Mixtral's experts (HF's router: a float32 softmax, the top k renormalized)
// as modelzoo's `moe` keys of `m`.
void read_mixtral_experts(const nlohmann::json& c, YAML::Node& m) {
  if (c.value("router_jitter_noise", 0.0) != 0.0)
    refuse_config(c, "router_jitter_noise", "changes the model's math and is not one zoo converts");
  YAML::Node moe(YAML::NodeType::Map);
  moe["num_experts"] = c.at("num_local_experts").get<int64_t>();
  moe["top_k"] = c.value("num_experts_per_tok", int64_t(2));
  moe["load_balancing_loss_coef"] = c.value("router_aux_loss_coef", 0.02);
  moe["router_fp32"] = true;
  m["moe"] = moe;
  m["name"] = "mixtral";
}

// The Mixtral config.json fields of `moe`, refusing routing HF's router does not compute.
void write_mixtral_experts(const MoeOptions& moe, nlohmann::json& config) {
  const std::string routing = "routes with a learned softmax router and renormalized top-k weights";
  ExportCheck("mixtral")
      .expect(moe.routing_algorithm == "learned", "moe.routing_algorithm", moe.routing_algorithm, routing)
      .expect(moe.router_selection_nonlinearity.value_or("softmax") == "softmax" &&
                  moe.expert_weighting_nonlinearity.value_or("softmax") == "softmax",
              "moe.*_nonlinearity", "not softmax", routing)
      .expect(moe.expert_weighting_normalization.value_or(false) && moe.null_expert_bias.value_or(0.0) == 0.0,
              "moe.expert_weighting_normalization / null_expert_bias", "other", routing)
      .expect(moe.router_fp32, "moe.router_fp32", "false", "routes in float32")
      .expect(!moe.num_shared_experts, "moe.num_shared_experts", std::to_string(moe.shared_experts()),
              "has no shared experts")
      .expect(!moe.router_use_bias.value_or(false), "moe.router_use_bias", "true", "has no router bias")
      .expect(!moe.probability_before_ffn, "moe.probability_before_ffn", "true", "weights the experts' outputs");
  config["num_local_experts"] = moe.num_experts;
  config["num_experts_per_tok"] = moe.top_k;
  config["router_aux_loss_coef"] = moe.load_balancing_loss_coef;
  config["router_jitter_noise"] = 0.0;
}

}  // namespace

HfAdapter llama_hf_adapter(const std::string& model_type) {
  HfAdapter a;
  a.config_from_hf = [model_type](const nlohmann::json& c) {
    const bool llama = model_type == "llama", qwen3 = model_type == "qwen3";
    const bool qwen = model_type == "qwen2" || qwen3;  // Qwen3: Qwen2's fields, q/k norms, no q/k/v biases
    // Fields that change the math: carried, or refused by name, never dropped.
    if (!llama && !qwen3)
      for (const char* key : {"attention_bias", "mlp_bias"})
        if (config_sets(c, key))
          throw std::runtime_error(std::string("config.json: ") + key + " = " + c.at(key).dump() +
                                   " changes the model's math and zoo cannot represent it yet");
    if (c.value("hidden_act", std::string("silu")) != "silu")
      throw std::runtime_error("config.json: hidden_act = " + c.at("hidden_act").dump() +
                               ": zoo's LLaMA/Mistral uses silu (SwiGLU) only");
    // Qwen2 keeps sliding_window for its use_sliding_window, which windows only the layers from max_window_layers on.
    if (qwen && config_sets(c, "use_sliding_window"))
      refuse_config(c, "use_sliding_window",
                    "windows the layers from max_window_layers on, which zoo's decoders do not");
    if (qwen && c.contains("layer_types") && c.at("layer_types").dump().find("sliding") != std::string::npos)
      refuse_config(c, "layer_types", "windows some layers, which zoo converts for Gemma 2's every other layer only");
    YAML::Node m = llama_shape(c, "llama", std::nullopt);
    if (!qwen && config_sets(c, "sliding_window"))
      m["attention_sliding_window_length"] = c.at("sliding_window").get<int64_t>();
    m["nonlinearity"] = "swiglu";
    m["share_embedding_weights"] = c.value("tie_word_embeddings", false);
    // LLaMA's attention_bias puts biases on q, k, v and o (Qwen3's too); Qwen2 has them on q, k and v.
    const bool attention_bias = (llama || qwen3) && c.value("attention_bias", false);
    m["use_projection_bias_in_attention"] = attention_bias || (qwen && !qwen3);
    m["use_ffn_bias_in_attention"] = attention_bias;
    if (qwen3) {
      if (config_sets(c, "mlp_bias")) refuse_config(c, "mlp_bias", "changes the model's math and is not Qwen3's");
      m["attention_qk_norm_layer"] = "rmsnorm";
      m["attention_qk_norm_eps"] = c.value("rms_norm_eps", 1e-6);
    }
    m["use_ffn_bias"] = llama && c.value("mlp_bias", false);
    m["attention_dropout_rate"] = 0.0;
    if (c.contains("num_local_experts")) read_mixtral_experts(c, m);
    return m;
  };
  a.config_to_hf = [model_type](const ModelSpec& model) {
    const Gpt2Options& o = gpt2_options_of(model);
    refuse_unrepresentable(o, model_type,
                           HfHas{.learned_positions = false,
                                 .rotary = true,
                                 .gated_ffn = true,
                                 .rms_norm = true,
                                 .rope_scaling = true,
                                 .head_dim = true,
                                 .qk_norm = model_type == "qwen3"});
    const bool llama = model_type == "llama", qwen2 = model_type == "qwen2", qwen3 = model_type == "qwen3";
    const bool mistral =
        model_type == "mistral" || model_type == "mixtral";  // Mixtral is Mistral's layers with experts
    const bool mixtral = model_type == "mixtral";
    const std::string attention_biases = std::string(o.use_projection_bias_in_attention ? "q/k/v" : "no q/k/v") +
                                         (o.use_ffn_bias_in_attention ? " and output" : ", no output");
    ExportCheck(model_type)
        .expect(o.nonlinearity == "swiglu", "nonlinearity", o.nonlinearity, "uses SwiGLU")
        .expect(!o.use_bias_in_output, "use_bias_in_output", "true", "has no LM head bias")
        .expect(llama || !o.use_ffn_bias, "use_ffn_bias", "true", "has no MLP biases (llama has mlp_bias)")
        .expect(!mistral || (!o.use_projection_bias_in_attention && !o.use_ffn_bias_in_attention),
                "use_*bias_in_attention", attention_biases + " biases", "has no attention biases")
        .expect(!qwen3 || (o.attention_qk_norm_layer.value_or("") == "rmsnorm" &&
                           o.attention_qk_norm_eps == o.layer_norm_epsilon),
                "attention_qk_norm_layer", o.attention_qk_norm_layer.value_or("null"),
                "normalizes each head's queries and keys with RMSNorm at rms_norm_eps")
        .expect(!(llama || qwen3) || o.use_projection_bias_in_attention == o.use_ffn_bias_in_attention,
                "use_*bias_in_attention", attention_biases + " biases",
                "has one attention_bias for q, k, v and o (q/k/v alone: --model qwen2)")
        .expect(!qwen2 || (o.use_projection_bias_in_attention && !o.use_ffn_bias_in_attention),
                "use_*bias_in_attention", attention_biases + " biases", "has q/k/v biases and no output bias");
    if (o.moe.enabled() != mixtral)
      throw std::runtime_error(mixtral ? "model.moe: Hugging Face's mixtral has experts: set moe.num_experts > 1, or "
                                         "convert with --model llama or mistral"
                                       : "model.moe: Hugging Face's " + model_type +
                                             " has no experts; convert with --model mixtral");
    if (o.attention_sliding_window_length && !mistral)
      throw std::runtime_error("model.attention_sliding_window_length: Hugging Face's " + model_type +
                               " has no sliding window; convert with --model mistral");
    nlohmann::json window = o.attention_sliding_window_length ? nlohmann::json(*o.attention_sliding_window_length)
                                                              : nlohmann::json(nullptr);
    nlohmann::json config = llama_config(o, model_type,
                                         mixtral   ? "MixtralForCausalLM"
                                         : mistral ? "MistralForCausalLM"
                                         : qwen2   ? "Qwen2ForCausalLM"
                                         : qwen3   ? "Qwen3ForCausalLM"
                                                   : "LlamaForCausalLM");
    config["hidden_act"] = "silu";
    if (mistral) config["sliding_window"] = window;
    if (mixtral) write_mixtral_experts(o.moe, config);
    if (llama || qwen3) config["attention_bias"] = o.use_projection_bias_in_attention;
    if (llama) config["mlp_bias"] = o.use_ffn_bias;
    if (qwen2 || qwen3) {
      config["use_sliding_window"] = false;
      config["sliding_window"] = nullptr;
      config["max_window_layers"] = o.num_hidden_layers;
    }
    return config;
  };
  a.model_types = {model_type};
  return key_mapped(a, gpt2_options_of, [](const Gpt2Options& o) {
    HfKeyMap m = llama_layout(o);
    for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
      const std::string h = "model.layers." + std::to_string(i) + ".", z = zoo_layer(i);
      m.norm(h + "post_attention_layernorm", z + "norm3");
      if (o.attention_qk_norm_layer)  // Qwen3; the rotary re-orders their weights as the q/k rows
        for (const char* n : {"q_norm", "k_norm"}) m.norm(h + "self_attn." + n, z + "self_attn." + n);
      if (!o.moe.enabled()) {
        map_llama_mlp(m, h, z);
        continue;
      }
      // Mixtral: w1 is the gate, w3 the up projection, w2 the down (modelzoo's converter's names too).
      m.linear(h + "block_sparse_moe.gate", z + "ffn.gate");
      for (int64_t e = 0; e < o.moe.num_experts; ++e) {
        const std::string he = h + "block_sparse_moe.experts." + std::to_string(e) + ".",
                          ze = z + "ffn.experts.experts." + std::to_string(e) + ".ffn.";
        m.linear(he + "w1", ze + "0.linear_layer_for_glu");
        m.linear(he + "w3", ze + "0.linear_layer");
        m.linear(he + "w2", ze + "1.linear_layer");
      }
    }
    return m;
  });
}

}  // namespace zoo::models
