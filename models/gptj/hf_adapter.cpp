// Implementation of models/gptj/hf_adapter.h.
#include "models/gptj/hf_adapter.h"

#include "models/gpt2/hf_adapter.h"
#include "models/gptj/gptj.h"
#include "models/hf/hf_key_map.h"
#include "models/hf/hf_keys.h"

namespace zoo::models {
namespace {

const GptjOptions& options_of(const ModelSpec& model) {
  return spec_options<GptjSpec>(model, "this Hugging Face converter takes a gptj-family model section");
}

int64_t rotary_dims(const GptjOptions& o) { return o.rotary_dim.value_or(o.hidden_size / o.num_heads); }

// The checks every gptj-family export shares: rotary positions and LayerNorm.
ExportCheck expect_rotary_layernorm(const GptjOptions& o, const std::string& model_type) {
  ExportCheck check(model_type);
  check
      .expect(o.position_embedding_type == "rotary", "position_embedding_type", o.position_embedding_type,
              "uses rotary")
      .expect(o.norm_type == "layernorm", "norm_type", o.norm_type, "uses LayerNorm")
      .expect(o.attention_type == "scaled_dot_product", "attention_type", o.attention_type, "scales by sqrt(head dim)")
      .expect(o.embeddings_scale == 1.0 && !o.scale_qk_dot_by_d && o.attention_logits_alpha == 1.0 &&
                  !o.mup_base_hidden_size && !o.mup_base_filter_size,
              "muP keys", "set", "has no muP")
      .expect(o.pos_scaling_factor == 1.0 && o.pos_scaling_type == "linear", "pos_scaling_*",
              o.pos_scaling_type + " x" + std::to_string(o.pos_scaling_factor),
              "is converted without position scaling");
  return check;
}

// The `model` keys of a parallel decoder: shape, dropouts and what the caller passes.
YAML::Node parallel_shape(int64_t vocab, int64_t C, int64_t L, int64_t H, int64_t filter, int64_t positions) {
  YAML::Node m(YAML::NodeType::Map);
  m["name"] = "gptj";
  m["vocab_size"] = vocab;
  m["hidden_size"] = C;
  m["num_hidden_layers"] = L;
  m["num_heads"] = H;
  m["filter_size"] = filter;
  m["max_position_embeddings"] = positions;
  m["position_embedding_type"] = "rotary";
  m["use_bias_in_output"] = false;
  m["embedding_dropout_rate"] = 0.0;
  return m;
}

HfKeyMap neox_keys(const GptjOptions& o) {
  HfKeyMap m;
  m.qkv = qkv_shape(o);
  m.half_split_rotary_dim = rotary_dims(o);
  m.hf_buffers = {"rotary_emb.inv_freq", ".attention.bias", ".attention.masked_bias"};
  m.tensors.push_back({"gpt_neox.embed_in.weight", "embedding_layer.word_embeddings.weight"});
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
    const std::string h = "gpt_neox.layers." + std::to_string(i) + ".", z = zoo_layer(i);
    m.norm(h + "input_layernorm", z + "norm1");
    m.norm(h + "post_attention_layernorm", z + "norm3");
    m.fused_qkv(h + "attention.query_key_value", z + "self_attn.", QkvLayout::kPerGroup);  // per head [q; k; v]
    m.linear(h + "attention.dense", z + "self_attn.proj_output_dense_layer");
    m.linear(h + "mlp.dense_h_to_4h", z + "ffn.ffn.0.linear_layer");
    m.linear(h + "mlp.dense_4h_to_h", z + "ffn.ffn.1.linear_layer");
  }
  m.norm("gpt_neox.final_layer_norm", "transformer_decoder.norm");
  m.lm_head(/*tied=*/false, "embed_out.weight");
  return m;
}

// GPT-J's layout; CodeGen's (`codegen`) fuses q/k/v into qkv_proj.
HfKeyMap gptj_keys(const GptjOptions& o, bool codegen) {
  HfKeyMap m;
  m.qkv = qkv_shape(o);
  m.hf_prefix = "transformer.";
  m.hf_buffers = {".attn.bias", ".attn.masked_bias", ".attn.embed_positions", ".attn.causal_mask"};
  m.tensors.push_back({"transformer.wte.weight", "embedding_layer.word_embeddings.weight"});
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".", z = zoo_layer(i);
    m.norm(h + "ln_1", z + "norm1");
    if (codegen) m.fused_qkv(h + "attn.qkv_proj", z + "self_attn.", QkvLayout::kCodeGenShards);
    else
      for (const char* p : {"q", "k", "v"})
        m.linear(h + "attn." + p + "_proj", z + "self_attn.proj_" + p + "_dense_layer");
    m.linear(h + "attn.out_proj", z + "self_attn.proj_output_dense_layer");
    m.linear(h + "mlp.fc_in", z + "ffn.ffn.0.linear_layer");
    m.linear(h + "mlp.fc_out", z + "ffn.ffn.1.linear_layer");
  }
  m.norm("transformer.ln_f", "transformer_decoder.norm");
  m.lm_head(o.share_embedding_weights);
  m.tensors.push_back({"lm_head.bias", "lm_head.bias"});
  return m;
}

HfKeyMap falcon_keys(const GptjOptions& o) {
  HfKeyMap m;
  m.qkv = qkv_shape(o);
  m.half_split_rotary_dim = rotary_dims(o);
  m.hf_prefix = "transformer.";
  m.hf_buffers = {"rotary_emb.inv_freq"};
  m.tensors.push_back({"transformer.word_embeddings.weight", "embedding_layer.word_embeddings.weight"});
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".", z = zoo_layer(i);
    if (o.use_untied_layer_norm) {
      m.norm(h + "ln_attn", z + "norm1");
      m.norm(h + "ln_mlp", z + "norm3");
    } else {
      m.norm(h + "input_layernorm", z + "norm1");
    }
    m.fused_qkv(h + "self_attention.query_key_value", z + "self_attn.", QkvLayout::kPerGroup);
    m.linear(h + "self_attention.dense", z + "self_attn.proj_output_dense_layer");
    m.linear(h + "mlp.dense_h_to_4h", z + "ffn.ffn.0.linear_layer");
    m.linear(h + "mlp.dense_4h_to_h", z + "ffn.ffn.1.linear_layer");
  }
  m.norm("transformer.ln_f", "transformer_decoder.norm");
  m.lm_head(o.share_embedding_weights);
  return m;
}

}  // namespace

HfAdapter neox_hf_adapter() {
  HfAdapter a;
  a.model_types = {"gpt_neox"};
  a.config_from_hf = [](const nlohmann::json& c) {
    const HfRope rope = read_hf_rope(c, {"rope_theta", "rotary_emb_base"}, 10000.0);
    if (!rope.scaling.is_null()) refuse_config(c, rope.field, "changes the math");
    if (!c.value("use_parallel_residual", true))
      refuse_config(c, "use_parallel_residual", "(a sequential NeoX layer) is not zoo's gptj layout");
    if (!c.value("attention_bias", true)) refuse_config(c, "attention_bias", "is not GPT-NeoX's layout");
    const int64_t C = c.at("hidden_size").get<int64_t>(), H = c.at("num_attention_heads").get<int64_t>();
    YAML::Node m = rotary_decoder_shape(c, "gptj");
    const double rotary_fraction =
        config_get<double>(c, {"rotary_pct", "partial_rotary_factor"}, rope.partial_rotary_factor.value_or(0.25));
    m["rotary_dim"] = static_cast<int64_t>(double(C / H) * rotary_fraction);
    m["rope_theta"] = rope.theta;
    m["use_untied_layer_norm"] = true;
    m["layer_norm_epsilon"] = c.value("layer_norm_eps", 1e-5);
    m["nonlinearity"] = zoo_activation(c, "hidden_act", "gelu");
    m["share_embedding_weights"] = c.value("tie_word_embeddings", false);
    m["use_projection_bias_in_attention"] = true;
    m["use_ffn_bias_in_attention"] = true;
    m["use_ffn_bias"] = true;
    m["use_bias_in_output"] = false;
    m["residual_dropout_rate"] = c.value("hidden_dropout", 0.0);
    m["attention_dropout_rate"] = c.value("attention_dropout", 0.0);
    m["embedding_dropout_rate"] = 0.0;
    m["initializer_range"] = c.value("initializer_range", 0.02);
    return m;
  };
  a.config_to_hf = [](const ModelSpec& model) {
    const GptjOptions& o = options_of(model);
    const int64_t D = o.hidden_size / o.num_heads;
    expect_rotary_layernorm(o, "gpt_neox")
        .expect(o.use_untied_layer_norm, "use_untied_layer_norm", "false",
                "unties the norms (GPT-J / Falcon 7B do not)");
    expect_mha(o, "gpt_neox");
    ExportCheck("gpt_neox")
        .expect(o.use_projection_bias_in_attention && o.use_ffn_bias_in_attention && o.use_ffn_bias &&
                    !o.use_bias_in_output,
                "use_*bias*", "as set", "has biases on every projection and none on the output")
        .expect(!o.share_embedding_weights, "share_embedding_weights", "true", "unties embed_out");
    return nlohmann::json{{"model_type", "gpt_neox"},
                          {"architectures", {"GPTNeoXForCausalLM"}},
                          {"vocab_size", o.vocab_size},
                          {"hidden_size", o.hidden_size},
                          {"num_hidden_layers", o.num_hidden_layers},
                          {"num_attention_heads", o.num_heads},
                          {"intermediate_size", o.filter_size},
                          {"max_position_embeddings", o.max_position_embeddings},
                          {"rotary_pct", double(rotary_dims(o)) / double(D)},
                          {"rotary_emb_base", o.rope_theta},
                          {"rope_theta", o.rope_theta},
                          {"use_parallel_residual", true},
                          {"attention_bias", true},
                          {"layer_norm_eps", o.layer_norm_epsilon},
                          {"hidden_act", o.nonlinearity},
                          {"hidden_dropout", o.residual_dropout_rate},
                          {"attention_dropout", o.attention_dropout_rate},
                          {"tie_word_embeddings", false},
                          {"initializer_range", o.initializer_range}};
  };
  return key_mapped(a, options_of, neox_keys);
}

// GPT-J and CodeGen: one norm feeding attention and FFN, no attention
// biases, biased FFN and LM head, interleaved partial rotary with base 10000.
HfAdapter gptj_hf_adapter(const std::string& model_type) {
  HfAdapter a;
  a.model_types = {model_type};
  const bool codegen = model_type == "codegen";
  a.config_from_hf = [](const nlohmann::json& c) {
    if (!config_sets(c, "rotary_dim"))
      refuse_config(c, "rotary_dim",
                    "(Hugging Face's GPT-J then rotates by the model width, not per head) is not in zoo");
    const int64_t C = c.at("n_embd").get<int64_t>();
    YAML::Node m = parallel_shape(c.at("vocab_size").get<int64_t>(), C, c.at("n_layer").get<int64_t>(),
                                  c.at("n_head").get<int64_t>(), config_get<int64_t>(c, {"n_inner"}, 4 * C),
                                  c.at("n_positions").get<int64_t>());
    m["rotary_dim"] = c.at("rotary_dim").get<int64_t>();
    m["rope_theta"] = 10000.0;
    m["use_untied_layer_norm"] = false;
    m["layer_norm_epsilon"] = c.value("layer_norm_epsilon", 1e-5);
    m["nonlinearity"] = zoo_activation(c, "activation_function", "gelu_new");
    m["share_embedding_weights"] = c.value("tie_word_embeddings", false);
    m["use_projection_bias_in_attention"] = false;
    m["use_ffn_bias_in_attention"] = false;
    m["use_ffn_bias"] = true;
    m["use_bias_in_output"] = true;
    m["residual_dropout_rate"] = c.value("resid_pdrop", 0.0);
    m["attention_dropout_rate"] = c.value("attn_pdrop", 0.0);
    m["embedding_dropout_rate"] = c.value("embd_pdrop", 0.0);
    m["initializer_range"] = c.value("initializer_range", 0.02);
    return m;
  };
  a.config_to_hf = [model_type, codegen](const ModelSpec& model) {
    const GptjOptions& o = options_of(model);
    expect_rotary_layernorm(o, model_type)
        .expect(!o.use_untied_layer_norm, "use_untied_layer_norm", "true", "has one norm per layer")
        .expect(o.rope_theta == 10000.0, "rope_theta", std::to_string(o.rope_theta),
                "has base 10000 and no field for it")
        .expect(!codegen || o.num_heads % kCodeGenShards == 0, "num_heads", std::to_string(o.num_heads),
                "splits its heads over " + std::to_string(kCodeGenShards) + " model-parallel shards");
    expect_mha(o, model_type);
    ExportCheck(model_type)
        .expect(!o.use_projection_bias_in_attention && !o.use_ffn_bias_in_attention && o.use_ffn_bias, "use_*bias*",
                "as set", "has biases on the FFN and none on the attention")
        .expect(o.use_bias_in_output, "use_bias_in_output", "false", "has an LM-head bias");
    // GPT-J's and CodeGen's config.json have GPT-2's field names (CodeGen keeps n_ctx).
    nlohmann::json c = gpt2_config(o.as_gpt2(), model_type, codegen ? "CodeGenForCausalLM" : "GPTJForCausalLM");
    c.erase("scale_attn_weights");
    c.erase("scale_attn_by_inverse_layer_idx");
    if (!codegen) c.erase("n_ctx");
    c["rotary_dim"] = rotary_dims(o);
    return c;
  };
  return key_mapped(a, options_of, [codegen](const GptjOptions& o) { return gptj_keys(o, codegen); });
}

// Falcon: parallel attention and FFN, rotary on the whole head (half-split),
// query_key_value per key/value group: multi_query (7B) has one group;
// new_decoder_architecture (40B, 180B) num_kv_heads groups and, with
// num_ln_in_parallel_attn 2, untied norms ln_attn / ln_mlp.
HfAdapter falcon_hf_adapter() {
  HfAdapter a;
  a.model_types = {"falcon", "RefinedWebModel", "RefinedWeb"};
  a.config_from_hf = [](const nlohmann::json& c) {
    if (!c.value("parallel_attn", true))
      refuse_config(c, "parallel_attn", "(a sequential Falcon layer) is not zoo's gptj layout");
    if (config_sets(c, "alibi")) refuse_config(c, "alibi", "(Falcon's ALiBi, scaled with the scores) is not in zoo");
    if (c.value("apply_residual_connection_post_layernorm", false))
      refuse_config(c, "apply_residual_connection_post_layernorm",
                    "(the residual taken after the norm) is not zoo's layer");
    const HfRope rope = read_hf_rope(c, {"rope_theta"}, 10000.0);
    if (!rope.scaling.is_null() || rope.partial_rotary_factor.value_or(1.0) != 1.0)
      refuse_config(c, rope.field, "changes the math");
    const int64_t C = config_get<int64_t>(c, {"hidden_size", "n_embed"});
    const int64_t H = config_get<int64_t>(c, {"num_attention_heads", "n_head"});
    // Falcon 40B's original config.json (model_type RefinedWeb) implies the new architecture.
    const bool new_arch = c.value("new_decoder_architecture", c.value("model_type", std::string()) == "RefinedWeb");
    const int64_t G =
        new_arch ? config_get<int64_t>(c, {"num_kv_heads", "n_head_kv"}, H) : (c.value("multi_query", true) ? 1 : H);
    const bool bias = c.value("bias", false);
    YAML::Node m =
        parallel_shape(c.at("vocab_size").get<int64_t>(), C, config_get<int64_t>(c, {"num_hidden_layers", "n_layer"}),
                       H, config_get<int64_t>(c, {"ffn_hidden_size"}, 4 * C), c.value("max_position_embeddings", 2048));
    m["rotary_dim"] = C / H;
    m["rope_theta"] = rope.theta;
    m["use_untied_layer_norm"] = new_arch && config_get<int64_t>(c, {"num_ln_in_parallel_attn"}, 2) == 2;
    if (G != H) {
      m["attention_module"] = "multiquery_attention";
      m["extra_attention_params"]["num_kv_groups"] = G;
    }
    m["layer_norm_epsilon"] = c.value("layer_norm_epsilon", 1e-5);
    m["nonlinearity"] = zoo_activation(c, "activation", "gelu");
    m["share_embedding_weights"] = c.value("tie_word_embeddings", true);
    m["use_projection_bias_in_attention"] = bias;
    m["use_ffn_bias_in_attention"] = bias;
    m["use_ffn_bias"] = bias;
    m["residual_dropout_rate"] = c.value("hidden_dropout", 0.0);
    m["attention_dropout_rate"] = c.value("attention_dropout", 0.0);
    m["initializer_range"] = c.value("initializer_range", 0.02);
    return m;
  };
  a.config_to_hf = [](const ModelSpec& model) {
    const GptjOptions& o = options_of(model);
    const QkvShape s = qkv_shape(o);
    const bool bias = o.use_projection_bias_in_attention;
    expect_rotary_layernorm(o, "falcon")
        .expect(rotary_dims(o) == s.head_dim, "rotary_dim", std::to_string(rotary_dims(o)), "rotates the whole head")
        .expect(o.use_ffn_bias_in_attention == bias && o.use_ffn_bias == bias && !o.use_bias_in_output, "use_*bias*",
                "as set", "has one `bias` switch for every projection and no LM-head bias");
    // The original layout holds one group (multi_query) or one per head; any other needs the new one.
    const bool new_arch = o.use_untied_layer_norm || (s.kv_heads != 1 && s.kv_heads != s.heads);
    nlohmann::json c{{"model_type", "falcon"},
                     {"architectures", {"FalconForCausalLM"}},
                     {"vocab_size", o.vocab_size},
                     {"hidden_size", o.hidden_size},
                     {"num_hidden_layers", o.num_hidden_layers},
                     {"num_attention_heads", o.num_heads},
                     {"ffn_hidden_size", o.filter_size},
                     {"max_position_embeddings", o.max_position_embeddings},
                     {"rope_theta", o.rope_theta},
                     {"parallel_attn", true},
                     {"alibi", false},
                     {"bias", bias},
                     {"new_decoder_architecture", new_arch},
                     {"multi_query", s.kv_heads == 1},
                     {"layer_norm_epsilon", o.layer_norm_epsilon},
                     {"activation", o.nonlinearity},
                     {"hidden_dropout", o.residual_dropout_rate},
                     {"attention_dropout", o.attention_dropout_rate},
                     {"tie_word_embeddings", o.share_embedding_weights},
                     {"initializer_range", o.initializer_range}};
    if (new_arch) {
      c["num_kv_heads"] = s.kv_heads;
      c["num_ln_in_parallel_attn"] = o.use_untied_layer_norm ? 2 : 1;
    }
    return c;
  };
  return key_mapped(a, options_of, falcon_keys);
}

}  // namespace zoo::models
