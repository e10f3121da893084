// Implementation of models/gptj/hf_adapter.h.
#include "models/gptj/hf_adapter.h"

#include <algorithm>
#include <cmath>

#include "models/common/hf_keys.h"
#include "models/gptj/gptj.h"

namespace zoo::models {
namespace {

const GptjOptions& options_of(const ModelSpec& model) {
  const auto* typed = dynamic_cast<const GptjSpec*>(&model);
  if (!typed) throw std::invalid_argument("the GPT-NeoX converter takes a gptj-family model section");
  return typed->options();
}

[[noreturn]] void refuse(const std::string& what) {
  throw std::runtime_error(what + "; zoo will not convert the model without it");
}

int64_t rotary_dims(const GptjOptions& o) { return o.rotary_dim.value_or(o.hidden_size / o.num_heads); }

// The HF <-> zoo names of one direction's tensors, with the per-layer
// query_key_value split into (or joined from) q, k, v.
StateDict convert(const StateDict& in, const GptjOptions& o, bool to_zoo) {
  const int64_t C = o.hidden_size, H = o.num_heads, D = C / H, R = rotary_dims(o);
  StateDict rest = in, out;
  for (auto it = rest.begin(); it != rest.end();) {  // buffers HF rebuilds itself
    const std::string& k = it->first;
    const bool buffer = k.find("rotary_emb.inv_freq") != std::string::npos || k.find(".attention.bias") != std::string::npos ||
                        k.find(".attention.masked_bias") != std::string::npos;
    it = to_zoo && buffer ? rest.erase(it) : std::next(it);
  }
  std::vector<std::pair<std::string, std::string>> names = {  // (hf, zoo)
      {"gpt_neox.embed_in.weight", "embedding_layer.word_embeddings.weight"},
      {"gpt_neox.final_layer_norm.weight", "transformer_decoder.norm.weight"},
      {"gpt_neox.final_layer_norm.bias", "transformer_decoder.norm.bias"},
      {"embed_out.weight", "lm_head.weight"}};
  for (int64_t i = 0; i < o.num_hidden_layers; ++i) {
    const std::string h = "gpt_neox.layers." + std::to_string(i) + ".", z = "transformer_decoder.layers." + std::to_string(i) + ".";
    for (const char* p : {"weight", "bias"}) {
      names.emplace_back(h + "input_layernorm." + p, z + "norm1." + p);
      names.emplace_back(h + "post_attention_layernorm." + p, z + "norm3." + p);
      names.emplace_back(h + "attention.dense." + p, z + "self_attn.proj_output_dense_layer." + p);
      names.emplace_back(h + "mlp.dense_h_to_4h." + p, z + "ffn.ffn.0.linear_layer." + p);
      names.emplace_back(h + "mlp.dense_4h_to_h." + p, z + "ffn.ffn.1.linear_layer." + p);
      // query_key_value rows are per head [q_h; k_h; v_h], D rows each.
      const std::string qkv = h + "attention.query_key_value." + p;
      const std::string q = z + "self_attn.proj_q_dense_layer." + p, k = z + "self_attn.proj_k_dense_layer." + p,
                        v = z + "self_attn.proj_v_dense_layer." + p;
      if (to_zoo) {
        torch::Tensor t = take_key(rest, qkv);
        auto parts = t.view({H, 3, D, -1}).unbind(1);  // each (H, D, in or 1)
        auto flat = [&](const torch::Tensor& x) { return x.reshape(t.dim() == 1 ? std::vector<int64_t>{C} : std::vector<int64_t>{C, t.size(1)}); };
        out[q] = permute_rotary(flat(parts[0]), H, R, true);
        out[k] = permute_rotary(flat(parts[1]), H, R, true);
        out[v] = flat(parts[2]).contiguous();
      } else {
        torch::Tensor tq = permute_rotary(take_key(rest, q), H, R, false), tk = permute_rotary(take_key(rest, k), H, R, false),
                      tv = take_key(rest, v);
        const bool bias = tq.dim() == 1;
        auto heads = [&](const torch::Tensor& x) { return x.reshape({H, D, bias ? 1 : x.size(1)}); };
        torch::Tensor joined = torch::stack({heads(tq), heads(tk), heads(tv)}, 1);  // (H, 3, D, in or 1)
        out[qkv] = bias ? joined.reshape({3 * C}).contiguous() : joined.reshape({3 * C, tq.size(1)}).contiguous();
      }
    }
  }
  for (const auto& [hf_name, zoo_name] : names) out[to_zoo ? zoo_name : hf_name] = take_key(rest, to_zoo ? hf_name : zoo_name);
  require_consumed(rest, to_zoo ? "unexpected Hugging Face keys" : "zoo keys with no Hugging Face name");
  return out;
}

}  // namespace

HfAdapter neox_hf_adapter() {
  HfAdapter a;
  a.config_from_hf = [](const nlohmann::json& c) {
    auto present = [&](const char* key) { return c.contains(key) && !c.at(key).is_null() && c.at(key) != false; };
    if (present("rope_scaling")) refuse("config.json: rope_scaling = " + c.at("rope_scaling").dump() + " changes the math");
    if (!c.value("use_parallel_residual", true))
      refuse("config.json: use_parallel_residual = false (a sequential NeoX layer) is not zoo's gptj layout");
    if (!c.value("attention_bias", true)) refuse("config.json: attention_bias = false is not GPT-NeoX's layout");
    const std::string act = c.value("hidden_act", std::string("gelu"));
    if (std::find(kActivationNames.begin(), kActivationNames.end(), act) == kActivationNames.end() || is_glu(act))
      refuse("config.json: hidden_act = \"" + act + "\" is not an activation zoo has");
    const int64_t C = c.at("hidden_size").get<int64_t>(), H = c.at("num_attention_heads").get<int64_t>();
    const int64_t R = static_cast<int64_t>(double(C / H) * c.value("rotary_pct", 0.25));
    YAML::Node m = rotary_decoder_shape(c, "gptj");
    m["rotary_dim"] = R;
    m["rope_theta"] = c.contains("rope_theta") ? c.at("rope_theta").get<double>() : c.value("rotary_emb_base", 10000.0);
    m["use_untied_layer_norm"] = true;
    m["layer_norm_epsilon"] = c.value("layer_norm_eps", 1e-5);
    m["nonlinearity"] = act;
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
    if (!o.use_untied_layer_norm) refuse("model.use_untied_layer_norm = false (GPT-J / Falcon 7B): GPT-NeoX unties them");
    if (o.attention_module == "multiquery_attention") refuse("model.attention_module = multiquery_attention: GPT-NeoX has none");
    if (o.position_embedding_type != "rotary") refuse("model.position_embedding_type = " + o.position_embedding_type);
    if (o.norm_type != "layernorm") refuse("model.norm_type = " + o.norm_type + ": GPT-NeoX uses LayerNorm");
    if (!o.use_projection_bias_in_attention || !o.use_ffn_bias_in_attention || !o.use_ffn_bias || o.use_bias_in_output)
      refuse("model: GPT-NeoX has biases on every projection and none on the output");
    if (o.share_embedding_weights) refuse("model.share_embedding_weights = true: GPT-NeoX unties embed_out");
    if (o.attention_type != "scaled_dot_product") refuse("model.attention_type = " + o.attention_type);
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
  a.from_hf = [](const StateDict& hf, const ModelSpec& model) { return convert(hf, options_of(model), true); };
  a.to_hf = [](const StateDict& z, const ModelSpec& model) { return convert(z, options_of(model), false); };
  return a;
}

}  // namespace zoo::models
