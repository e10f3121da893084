// Hugging Face config.json <-> zoo for the whole decoder zoo: the converter
// comes from model_type, the published config.json files of each family
// convert to models of their published sizes, and modelzoo's own configs
// export to the Hugging Face model they were made from.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "configs/schema/yaml_util.h"
#include "convert_fixtures.h"
#include "models/registry.h"
#include "runner/convert/convert.h"
#include "runner/run.h"

using namespace zoo;
using zoo::testing::expect_refused;

// Without --model the converter comes from model_type; an unknown one, or an
// export without --model, is an error listing the converters there are.
TEST(ConvertConfigs, ConverterFromModelTypeAndItsErrors) {
  nlohmann::json c{{"model_type", "gpt2"}};
  EXPECT_EQ(models::hf_converter_for(c), "gpt2");
  c["attention_head_type"] = "multiquery";
  EXPECT_EQ(models::hf_converter_for(c), "santacoder");
  for (const auto& [type, name] : std::vector<std::pair<std::string, std::string>>{{"gpt_bigcode", "starcoder"},
                                                                                   {"gpt_neox", "gpt-neox"},
                                                                                   {"gptj", "gptj"},
                                                                                   {"falcon", "falcon"},
                                                                                   {"RefinedWebModel", "falcon"},
                                                                                   {"bloom", "bloom"},
                                                                                   {"mpt", "mpt"},
                                                                                   {"btlm", "btlm"},
                                                                                   {"jais", "jais"},
                                                                                   {"codegen", "codegen"},
                                                                                   {"llama", "llama"},
                                                                                   {"mistral", "mistral"},
                                                                                   {"t5", "t5"},
                                                                                   {"qwen2", "qwen2"},
                                                                                   {"qwen3", "qwen3"},
                                                                                   {"gemma", "gemma"},
                                                                                   {"gemma2", "gemma2"}})
    EXPECT_EQ(models::hf_converter_for({{"model_type", type}}), name) << type;
  expect_refused(
      [] {
        models::hf_converter_for({{"model_type", "bart"}});
      },
      {"model_type \"bart\" has no zoo converter", "bloom", "starcoder", "t5"});
  expect_refused([] { models::hf_converter_for(nlohmann::json::object()); }, {"no model_type", "--model"});
  expect_refused([] { models::find_hf_converter("gpt-5"); },
                 {"no Hugging Face converter named 'gpt-5'", "mpt", "code-llama (llama)"});
  // modelzoo's converter names for models another converter reads.
  for (const auto& [alias, name] : models::hf_converter_aliases())
    EXPECT_EQ(&models::find_hf_converter(alias), &models::find_hf_converter(name)) << alias;
  EXPECT_EQ(&models::find_hf_converter("code-llama"), &models::find_hf_converter("llama"));
  EXPECT_EQ(&models::find_hf_converter("sqlcoder"), &models::find_hf_converter("starcoder"));
}

// modelzoo's own configs of each family export to the Hugging Face model
// they were made from, and that config.json reads back as the same shape.
TEST(ConvertConfigs, RealModelzooConfigsExportToTheirHuggingFaceModels) {
  for (const auto& [file, converter] : std::vector<std::pair<std::string, std::string>>{
           {"transformers_pytorch_gpt2_params_gpt2_small.yaml", "gpt2"},
           {"transformers_pytorch_gptj_params_gptj_6B.yaml", "gptj"},
           {"transformers_pytorch_gptj_params_gpt_neox_small.yaml", "gpt-neox"},
           {"transformers_pytorch_falcon_params_falcon_7b.yaml", "falcon"},
           {"transformers_pytorch_bloom_params_bloom_7b.yaml", "bloom"},
           {"transformers_pytorch_mpt_params_mpt_7B.yaml", "mpt"},
           {"transformers_pytorch_btlm_params_btlm_2p7b_2k.yaml", "btlm"},
           {"transformers_pytorch_santacoder_params_santacoder_1b.yaml", "santacoder"},
           {"transformers_pytorch_starcoder_params_starcoder_15b.yaml", "starcoder"},
           {"transformers_pytorch_llama_params_code_llama_7b.yaml", "llama"},
           {"transformers_pytorch_llama_params_llama2_70b.yaml", "llama"},
           {"transformers_pytorch_mistral_params_mistral_7B.yaml", "mistral"}}) {
    SCOPED_TRACE(file);
    Params p = load_params(zoo::testing::modelzoo_configs_dir() + "/" + file, YAML::Node());
    const models::HfAdapter& a = models::find_hf_converter(converter);
    nlohmann::json config;
    ASSERT_NO_THROW(config = a.config_to_hf(*p.model));
    EXPECT_EQ(models::hf_converter_for(config), converter);
    YAML::Node back = a.config_from_hf(config);
    const YAML::Node original = config::load_yaml_file(zoo::testing::modelzoo_configs_dir() + "/" + file)["model"];
    for (const char* key : {"vocab_size", "hidden_size", "num_hidden_layers", "num_heads", "filter_size"})
      EXPECT_EQ(back[key].as<int64_t>(), original[key].as<int64_t>()) << key;
    const bool multi_query =
        original["attention_module"] && original["attention_module"].as<std::string>() == "multiquery_attention";
    EXPECT_EQ(back["attention_module"] && back["attention_module"].as<std::string>() == "multiquery_attention",
              multi_query);
    if (multi_query)
      EXPECT_EQ(back["extra_attention_params"]["num_kv_groups"].as<int64_t>(),
                original["extra_attention_params"]["num_kv_groups"].as<int64_t>());
  }
}

// Hugging Face's own config.json files (their fields as published, the ones
// that do not change the math included) convert to zoo models of the
// models' parameter counts: as their cards and papers give them (BLOOM-560m,
// Falcon-7B, MPT-7B, GPT-J-6B, Pythia-160m), or where those round (SantaCoder
// "1.1B", StarCoder "15.5B", BTLM "3B"), HF's architecture's count for that
// config. zoo adds only BLOOM's and MPT's ALiBi slopes, which HF computes
// instead of storing. Gemma-2-2B (2,614,341,888), Gemma-7B (8,537,680,896)
// Qwen2.5-0.5B (494,032,768) and Qwen3-0.6B (596,049,920) are the counts
// HF's models report.
TEST(ConvertConfigs, PublishedConfigJsonsGiveThePublishedParameterCounts) {
  struct Published {
    const char* name;
    const char* config;
    int64_t parameters;
  };
  const std::vector<Published> models_ = {
      {"bigscience/bloom-560m",
       R"({"apply_residual_connection_post_layernorm": false, "architectures": ["BloomForCausalLM"], "attention_dropout": 0.0,
           "attention_softmax_in_fp32": true, "bias_dropout_fusion": true, "hidden_dropout": 0.0, "hidden_size": 1024,
           "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "masked_softmax_fusion": true, "model_type": "bloom",
           "n_head": 16, "n_inner": null, "n_layer": 24, "offset_alibi": 100, "pretraining_tp": 1, "skip_bias_add": true,
           "slow_but_exact": false, "use_cache": true, "vocab_size": 250880})",
       559214592 + 16},
      {"tiiuae/falcon-7b",
       R"({"alibi": false, "apply_residual_connection_post_layernorm": false, "architectures": ["FalconForCausalLM"],
           "attention_dropout": 0.0, "bias": false, "hidden_dropout": 0.0, "hidden_size": 4544, "initializer_range": 0.02,
           "layer_norm_epsilon": 1e-05, "model_type": "falcon", "multi_query": true, "new_decoder_architecture": false,
           "num_attention_heads": 71, "num_hidden_layers": 32, "parallel_attn": true, "torch_dtype": "bfloat16",
           "use_cache": true, "vocab_size": 65024})",
       6921720704},
      {"mosaicml/mpt-7b",
       R"({"architectures": ["MPTForCausalLM"], "attn_config": {"alibi": true, "alibi_bias_max": 8, "attn_impl": "torch",
           "attn_pdrop": 0, "attn_type": "multihead_attention", "attn_uses_sequence_id": false, "clip_qkv": null,
           "prefix_lm": false, "qk_ln": false, "softmax_scale": null}, "d_model": 4096, "emb_pdrop": 0,
           "embedding_fraction": 1.0, "expansion_ratio": 4, "learned_pos_emb": true, "logit_scale": null,
           "max_seq_len": 2048, "model_type": "mpt", "n_heads": 32, "n_layers": 32, "no_bias": true,
           "norm_type": "low_precision_layernorm", "resid_pdrop": 0, "vocab_size": 50432})",
       6649286656 + 32},
      {"EleutherAI/gpt-j-6b",
       R"({"activation_function": "gelu_new", "architectures": ["GPTJForCausalLM"], "attn_pdrop": 0.0, "embd_pdrop": 0.0,
           "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "gptj", "n_embd": 4096, "n_head": 16,
           "n_inner": null, "n_layer": 28, "n_positions": 2048, "resid_pdrop": 0.0, "rotary": true, "rotary_dim": 64,
           "scale_attn_weights": true, "tie_word_embeddings": false, "vocab_size": 50400})",
       6050882784},
      {"EleutherAI/pythia-160m",
       R"({"architectures": ["GPTNeoXForCausalLM"], "hidden_act": "gelu", "hidden_size": 768, "initializer_range": 0.02,
           "intermediate_size": 3072, "layer_norm_eps": 1e-05, "max_position_embeddings": 2048, "model_type": "gpt_neox",
           "num_attention_heads": 12, "num_hidden_layers": 12, "rotary_emb_base": 10000, "rotary_pct": 0.25,
           "tie_word_embeddings": false, "use_parallel_residual": true, "vocab_size": 50304})",
       162322944},
      {"bigcode/santacoder",
       R"({"activation_function": "gelu_fast", "architectures": ["GPT2LMHeadCustomModel"], "attention_head_type": "multiquery",
           "attn_pdrop": 0.1, "embd_pdrop": 0.1, "initializer_range": 0.02, "layer_norm_epsilon": 1e-05,
           "model_type": "gpt2", "n_embd": 2048, "n_head": 16, "n_inner": 8192, "n_layer": 24, "n_positions": 2048,
           "reorder_and_upcast_attn": false, "resid_pdrop": 0.1, "scale_attn_by_inverse_layer_idx": false,
           "scale_attn_weights": true, "vocab_size": 49280})",
       1124886528},
      {"bigcode/starcoder",
       R"({"activation_function": "gelu_pytorch_tanh", "architectures": ["GPTBigCodeForCausalLM"],
           "attention_softmax_in_fp32": true, "attn_pdrop": 0.1, "embd_pdrop": 0.1, "initializer_range": 0.02,
           "layer_norm_epsilon": 1e-05, "model_type": "gpt_bigcode", "multi_query": true, "n_embd": 6144, "n_head": 48,
           "n_inner": 24576, "n_layer": 40, "n_positions": 8192, "resid_pdrop": 0.1,
           "scale_attention_softmax_in_fp32": true, "scale_attn_weights": true, "vocab_size": 49152})",
       15517456384},
      {"cerebras/btlm-3b-8k-base",
       R"({"activation_function": "swiglu", "architectures": ["BTLMLMHeadModel"], "attn_pdrop": 0.0, "embd_pdrop": 0.0,
           "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "btlm", "mup_embeddings_scale": 14.6,
           "mup_output_alpha": 2.22, "mup_scale_qk_dot_by_d": true, "mup_width_scale": 0.1, "n_embd": 2560, "n_head": 32,
           "n_inner": 6826, "n_layer": 32, "n_positions": 8192, "position_embedding_type": "alibi",
           "reorder_and_upcast_attn": false, "resid_pdrop": 0.0, "scale_attn_by_inverse_layer_idx": false,
           "scale_attn_weights": true, "vocab_size": 50257})",
       // 32 x (4C^2 + 4C + SwiGLU's 3CF + 2F + C + four norm vectors) + VC + 2C + 32 stored slopes
       int64_t{32} * (4 * 2560 * 2560 + 4 * 2560 + 3 * 2560 * 6826 + 2 * 6826 + 2560 + 4 * 2560) + 50257 * 2560 +
           2 * 2560 + 32},
      {"google/gemma-2-2b",
       R"({"architectures": ["Gemma2ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
           "attn_logit_softcapping": 50.0, "bos_token_id": 2, "cache_implementation": "hybrid", "eos_token_id": 1,
           "final_logit_softcapping": 30.0, "head_dim": 256, "hidden_act": "gelu_pytorch_tanh",
           "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 2304, "initializer_range": 0.02,
           "intermediate_size": 9216, "max_position_embeddings": 8192, "model_type": "gemma2", "num_attention_heads": 8,
           "num_hidden_layers": 26, "num_key_value_heads": 4, "pad_token_id": 0, "query_pre_attn_scalar": 256,
           "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096, "torch_dtype": "float32",
           "use_cache": true, "vocab_size": 256000})",
       2614341888},
      {"google/gemma-7b",
       R"({"architectures": ["GemmaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 2,
           "eos_token_id": 1, "head_dim": 256, "hidden_act": "gelu", "hidden_activation": null, "hidden_size": 3072,
           "initializer_range": 0.02, "intermediate_size": 24576, "max_position_embeddings": 8192, "model_type": "gemma",
           "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 16, "pad_token_id": 0,
           "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 10000.0, "torch_dtype": "bfloat16",
           "use_cache": true, "vocab_size": 256000})",
       8537680896},
      {"Salesforce/codegen-350M-mono",
       R"({"activation_function": "gelu_new", "architectures": ["CodeGenForCausalLM"], "attn_pdrop": 0.0,
           "bos_token_id": 1, "embd_pdrop": 0.0, "eos_token_id": 50256, "gradient_checkpointing": false,
           "initializer_range": 0.02, "layer_norm_epsilon": 1e-05, "model_type": "codegen", "n_ctx": 2048,
           "n_embd": 1024, "n_head": 16, "n_inner": null, "n_layer": 20, "n_positions": 2048, "resid_pdrop": 0.0,
           "rotary_dim": 32, "scale_attn_weights": true, "tie_word_embeddings": false, "use_cache": true,
           "vocab_size": 51200})",
       // "350M": 20 x (ln_1 2C + fused qkv 3C^2 + out C^2 + FFN 8C^2 + its biases 4C + C) + VC + ln_f 2C + head VC + V
       int64_t{20} * (2 * 1024 + 12 * 1024 * 1024 + 4096 + 1024) + 2 * 51200 * 1024 + 2048 + 51200},
      {"Qwen/Qwen2.5-0.5B",
       R"({"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
           "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
           "intermediate_size": 4864, "max_position_embeddings": 32768, "max_window_layers": 24, "model_type": "qwen2",
           "num_attention_heads": 14, "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
           "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
           "use_cache": true, "use_mrope": false, "use_sliding_window": false, "vocab_size": 151936})",
       494032768},
      {"Qwen/Qwen3-0.6B",
       R"({"architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
           "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
           "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960,
           "max_window_layers": 28, "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28,
           "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000,
           "sliding_window": null, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "use_cache": true,
           "use_sliding_window": false, "vocab_size": 151936})",
       596049920}};
  for (const auto& m : models_) {
    SCOPED_TRACE(m.name);
    const nlohmann::json config = nlohmann::json::parse(m.config);
    YAML::Node params = config::load_yaml_string(zoo::testing::tiny_params_yaml("/d", "/m"), "tiny.yaml");
    params["model"] = models::find_hf_converter(models::hf_converter_for(config)).config_from_hf(config);
    EXPECT_EQ(summarize_model(params_from_node(params, m.name, YAML::Node())).parameters, m.parameters);
  }
}
