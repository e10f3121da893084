// Hugging Face <-> zoo's gpt2 family: config.json <-> `model` section and
// each HF model type's checkpoint layout as an HfKeyMap. The converters, by
// modelzoo's names (HF model_type in brackets):
//   gpt2, btlm, jais                GPT-2's layout (Conv1D weights, c_attn),
//                                   BTLM and Jais adding SwiGLU, ALiBi slopes and muP;
//   llama, mistral, mixtral,        q/k rows re-ordered for the interleaved rotary;
//   qwen2, qwen3                    Mixtral's experts as modelzoo's `moe`; Qwen2's
//                                   q/k/v biases, Qwen3's q/k norms;
//   bloom, mpt                      ALiBi (hf_alibi.cpp);
//   santacoder (gpt2), starcoder    multi-query GPT-2s (hf_bigcode.cpp);
//     (gpt_bigcode)
//   gemma, gemma2                   LLaMA's layout with norms stored as weight - 1,
//                                   Gemma 2's extra norms and options (hf_gemma.cpp).
// config.json fields that change the math are carried or refused by name,
// and an export refuses options the HF type has no field for.
// Defines: the *_hf_adapter functions, gpt2_options_of, qkv_shape, HfHas,
// refuse_unrepresentable, gpt2_layout, gpt2_shape, gpt2_config,
// expect_gpt2_biases, expect_mha, llama_layout, map_llama_mlp, llama_shape, llama_config, read_rope,
// rope_scaling.
#pragma once

#include "models/gpt2/gpt2.h"
#include "models/hf/hf_key_map.h"
#include "models/registry.h"

namespace zoo::models {

HfAdapter gpt2_hf_adapter();
HfAdapter btlm_hf_adapter(const std::string& model_type);  // "btlm" or "jais"
HfAdapter llama_hf_adapter(const std::string& model_type);
HfAdapter bloom_hf_adapter();
HfAdapter mpt_hf_adapter();
HfAdapter santacoder_hf_adapter();
HfAdapter starcoder_hf_adapter();
HfAdapter gemma_hf_adapter(const std::string& model_type);  // "gemma" or "gemma2"

// The options of a gpt2-family spec (an error for another family's).
const Gpt2Options& gpt2_options_of(const ModelSpec& model);

// Query and key/value heads of a decoder's attention.
QkvShape qkv_shape(const DecoderLmOptions& o);

// Which of zoo's gpt2 extras a Hugging Face model type can hold.
struct HfHas {
  bool alibi = false, embedding_norm = false, biasless_norm = false, mup = false, layer_idx_scaling = false;
  bool learned_positions = true, rotary = false, gated_ffn = false, rms_norm = false;
  bool rope_scaling = false;  // linear and llama3 (LLaMA's rope_scaling)
  bool head_dim = false;      // q/k/v narrower than hidden_size (attention_inner_dim)
  // Gemma: any embeddings_scale (the converter checks it is sqrt(hidden_size));
  // Gemma 2 adds query_pre_attn_scalar (attention_logits_alpha), softcapping,
  // sandwich norms and a window on every other layer.
  bool embeddings_scale = false, gemma2 = false;
  bool qk_norm = false;  // q_norm / k_norm per head (Qwen3)
};
void refuse_unrepresentable(const Gpt2Options& o, const std::string& model_type, const HfHas& has);

// GPT-2's checkpoint layout (transformer.{wte, wpe, h.<i>.{ln_1, attn.c_proj,
// ln_2, mlp.c_fc, mlp.c_proj}, ln_f}, lm_head) without the q/k/v tensors,
// which the model types lay out differently. `conv1d`: weights stored (in, out).
HfKeyMap gpt2_layout(const Gpt2Options& o, bool conv1d);

// The `model` keys a GPT-2-style config.json (n_embd, n_layer, ...) gives;
// the activation from activation_function (default `default_activation`;
// "swiglu": left to the caller).
YAML::Node gpt2_shape(const nlohmann::json& c, const std::string& default_activation);
// The GPT-2-style config.json fields of `o`.
nlohmann::json gpt2_config(const Gpt2Options& o, const std::string& model_type, const std::string& architecture);
// GPT-2's layout is dense: every projection has its bias, the head none.
void expect_gpt2_biases(const Gpt2Options& o, const std::string& model_type);

// LLaMA's checkpoint layout (model.embed_tokens, model.norm, lm_head unless
// tied, and per layer self_attn.{q,k,v,o}_proj and input_layernorm), each
// norm weight stored minus `norm_offset` (Gemma's 1); the families add the
// rest of each layer. map_llama_mlp: mlp.{up,gate,down}_proj.
HfKeyMap llama_layout(const Gpt2Options& o, double norm_offset = 0.0);
void map_llama_mlp(HfKeyMap& m, const std::string& hf_layer, const std::string& zoo_layer);

// The `model` keys LLaMA-style config.jsons give alike (sizes, the rotary
// over head_dim, default `default_head_dim` or hidden_size / heads,
// RMSNorm, key/value groups, no FFN or head biases, no dropout); each type
// adds its activation, attention biases and tied embeddings.
YAML::Node llama_shape(const nlohmann::json& config, const std::string& family,
                       std::optional<int64_t> default_head_dim);
// The config.json fields LLaMA-style models share (sizes, key/value heads,
// head_dim, rms_norm_eps, the rotary, tied embeddings); an export whose
// rotary leaves part of each head alone is refused, as these types cannot.
nlohmann::json llama_config(const Gpt2Options& o, const std::string& model_type, const std::string& architecture);

// A LLaMA-style config.json's rotary (rope_theta, and rope_scaling linear or
// llama3; or transformers 5's rope_parameters) as the `model` keys rope_theta
// and pos_scaling_*; other scalings and partial rotaries are refused.
void read_rope(const nlohmann::json& config, YAML::Node& model);
// The rope_scaling config.json field of `o` (null: none).
nlohmann::json rope_scaling(const Gpt2Options& o);

// Unless the attention is multi-head: "model.attention_module = ...: Hugging Face's <type> has multi-head attention
// only".
void expect_mha(const DecoderLmOptions& o, const std::string& model_type);

}  // namespace zoo::models
