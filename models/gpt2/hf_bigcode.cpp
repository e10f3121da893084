// Hugging Face SantaCoder and StarCoder <-> zoo's gpt2 family: GPT-2s with
// multi-query attention (one key/value head). SantaCoder is BigCode's
// remote-code GPT2LMHeadCustomModel (model_type "gpt2", attention_head_type
// "multiquery": Conv1D q_attn and a fused [k; v] kv_attn); StarCoder is
// transformers' GPTBigCode (nn.Linear, c_attn as [q; k; v]).
#include "models/gpt2/hf_adapter.h"
#include "models/hf/hf_keys.h"

namespace zoo::models {
namespace {

// Multi-query with one key/value head, or (StarCoder only) multi-head.
bool single_kv_head(const Gpt2Options& o) {
  return o.attention_module == "multiquery_attention" && o.extra_attention_params.num_kv_groups == 1;
}

void set_multi_query(YAML::Node& m) {
  m["attention_module"] = "multiquery_attention";
  m["extra_attention_params"]["num_kv_groups"] = 1;
}

HfKeyMap santacoder_keys(const Gpt2Options& o) {
  HfKeyMap m = gpt2_layout(o, /*conv1d=*/true);
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
    const std::string h = "transformer.h." + std::to_string(i) + ".attn.", z = zoo_layer(i) + "self_attn.";
    m.linear(h + "q_attn", z + "proj_q_dense_layer", true);
    m.fused.push_back({h + "kv_attn.weight",
                       {z + "proj_k_dense_layer.weight", z + "proj_v_dense_layer.weight"},
                       QkvLayout::kBlocks,
                       /*transposed=*/true});
    m.fused.push_back({h + "kv_attn.bias",
                       {z + "proj_k_dense_layer.bias", z + "proj_v_dense_layer.bias"},
                       QkvLayout::kBlocks,
                       false,
                       /*optional=*/true});
  }
  return m;
}

HfKeyMap starcoder_keys(const Gpt2Options& o) {
  HfKeyMap m = gpt2_layout(o, /*conv1d=*/false);
  m.hf_buffers.push_back("transformer.bias");  // GPTBigCode's causal mask
  // Per key/value group [its queries; k; v]: one group gives [q; k; v], one per head GPTBigCode's multi-head layout.
  for (int64_t i = 0; i < o.num_hidden_layers; ++i)
    m.fused_qkv("transformer.h." + std::to_string(i) + ".attn.c_attn", zoo_layer(i) + "self_attn.",
                QkvLayout::kPerGroup);
  return m;
}

}  // namespace

HfAdapter santacoder_hf_adapter() {
  HfAdapter a;
  a.model_types = {"gpt2"};
  a.claims = [](const nlohmann::json& c) { return c.value("attention_head_type", std::string()) == "multiquery"; };
  a.config_from_hf = [](const nlohmann::json& c) {
    if (c.value("attention_head_type", std::string("multiquery")) != "multiquery")
      refuse_config(c, "attention_head_type", "is not SantaCoder's multiquery (convert with --model gpt2)");
    YAML::Node m = gpt2_shape(c, "gelu_new");
    set_multi_query(m);
    return m;
  };
  a.config_to_hf = [](const ModelSpec& model) {
    const Gpt2Options& o = gpt2_options_of(model);
    refuse_unrepresentable(o, "gpt2 (SantaCoder)", HfHas{.layer_idx_scaling = true});
    expect_gpt2_biases(o, "gpt2 (SantaCoder)");
    ExportCheck("gpt2 (SantaCoder)")
        .expect(single_kv_head(o), "attention_module", o.attention_module,
                "has multi-query attention with one key/value head");
    nlohmann::json c = gpt2_config(o, "gpt2", "GPT2LMHeadCustomModel");
    c["attention_head_type"] = "multiquery";
    c["auto_map"] = {{"AutoConfig", "bigcode/santacoder--configuration_gpt2_mq.GPT2CustomConfig"},
                     {"AutoModelForCausalLM", "bigcode/santacoder--modeling_gpt2_mq.GPT2LMHeadCustomModel"}};
    return c;
  };
  return key_mapped(a, gpt2_options_of, santacoder_keys);
}

HfAdapter starcoder_hf_adapter() {
  HfAdapter a;
  a.model_types = {"gpt_bigcode"};
  a.config_from_hf = [](const nlohmann::json& c) {
    YAML::Node m = gpt2_shape(c, "gelu_pytorch_tanh");
    // GPTBigCode's scale_attention_softmax_in_fp32 divides by layer_idx + 1 and multiplies back: numerics only.
    m["scale_qk_dot_by_layer_idx"] = false;
    m["attention_softmax_fp32"] = c.value("attention_softmax_in_fp32", true);
    if (c.value("multi_query", true)) set_multi_query(m);
    return m;
  };
  a.config_to_hf = [](const ModelSpec& model) {
    const Gpt2Options& o = gpt2_options_of(model);
    refuse_unrepresentable(o, "gpt_bigcode", HfHas{});
    expect_gpt2_biases(o, "gpt_bigcode");
    ExportCheck("gpt_bigcode")
        .expect(single_kv_head(o) || o.attention_module != "multiquery_attention",
                "extra_attention_params.num_kv_groups", std::to_string(o.extra_attention_params.num_kv_groups),
                "has one key/value head or one per query head");
    nlohmann::json c = gpt2_config(o, "gpt_bigcode", "GPTBigCodeForCausalLM");
    c.erase("scale_attn_by_inverse_layer_idx");
    c["multi_query"] = single_kv_head(o);
    c["attention_softmax_in_fp32"] = o.attention_softmax_fp32;
    c["scale_attention_softmax_in_fp32"] = o.attention_softmax_fp32;
    return c;
  };
  return key_mapped(a, gpt2_options_of, starcoder_keys);
}

}  // namespace zoo::models
