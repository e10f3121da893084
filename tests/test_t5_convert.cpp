// zoo convert for T5: Python writes a tiny random checkpoint in Hugging
// Face's T5ForConditionalGeneration layout with the logits of T5's forward
// pass written here from the paper and HF's published code (transformers
// cannot be installed here). zoo must convert it, give those logits to 1e-5
// on a padded batch, and convert back to the same tensors bit for bit; what
// HF's T5 cannot hold must be refused by name.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "convert_fixtures.h"
#include "models/t5/t5.h"
#include "runner/convert/convert.h"
#include "runner/convert/safetensors.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

// argv: dir, then "v1" (ReLU, embeddings tied to the head, which scales by
// d_model^-1/2), "glu" (gated-silu, an untied lm_head: T5 v1.1's layout) or
// "flan" (the same with gated-gelu, GELU's tanh form gating: FLAN-T5's).
const std::string kPyT5 = zoo::testing::oracle("t5_convert_make_t5.py");

void expect_t5_converts(const std::string& kind) {
  TempDir dir;
  const std::string script = zoo::testing::write_file(dir / "t5.py", std::string(zoo::testing::kPySafetensors) + kPyT5);
  auto r = zoo::testing::run_command(zoo::testing::fixture_python() + " " + script + " " + dir.path() + " " + kind);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  convert::run_convert({dir / "hf", "", "hf", "zoo", std::nullopt, dir / "zoo"});
  auto model = std::dynamic_pointer_cast<models::T5Model>(zoo::testing::load_converted(dir));
  ASSERT_TRUE(model);
  using zoo::testing::read_raw;
  const torch::Tensor src = read_raw(dir / "src.bin", torch::kLong, {2, 7}),
                      mask = read_raw(dir / "mask.bin", torch::kLong, {2, 7}),
                      tgt = read_raw(dir / "tgt.bin", torch::kLong, {2, 5});
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->logits(src, mask, tgt).narrow(-1, 0, 40);
  EXPECT_LT((logits - read_raw(dir / "logits.bin", torch::kFloat, {2, 5, 40})).abs().max().item<double>(), 1e-5)
      << kind;
  // Fine-tuning params: T5's text processor with the checkpoint's vocabulary, its 100 sentinels, <pad> to start.
  const YAML::Node params = YAML::LoadFile(dir / "zoo/params.yaml");
  EXPECT_EQ(params["model"]["name"].as<std::string>(), "t5");
  EXPECT_EQ(params["train_input"]["data_processor"].as<std::string>(), "T5DynamicDataProcessor");
  EXPECT_EQ(params["train_input"]["src_data_dir"].as<std::string>(), "./data/train");
  EXPECT_EQ(params["eval_input"]["src_data_dir"].as<std::string>(), "./data/val");
  EXPECT_FALSE(params["train_input"]["data_dir"]);
  EXPECT_EQ(params["train_input"]["sos_token"].as<std::string>(), "<pad>");

  convert::run_convert({dir / "zoo/checkpoint_0.mdl", "t5", "zoo", "hf", std::nullopt, dir / "back"});
  auto original = convert::read_safetensors(dir / "hf/model.safetensors");
  auto back = convert::read_safetensors(dir / "back/model.safetensors");
  size_t compared = 0;
  for (const auto& [k, t] : original) {
    if (k.find("embed_tokens") != std::string::npos) continue;  // tied copies
    ASSERT_TRUE(back.count(k)) << kind << ": " << k << " did not come back";
    EXPECT_TRUE(torch::equal(t, back[k])) << kind << ": " << k;
    ++compared;
  }
  EXPECT_EQ(compared, back.size()) << kind << ": the export wrote tensors the original did not have";
  const nlohmann::json config = nlohmann::json::parse(zoo::testing::read_file(dir / "back/config.json"));
  EXPECT_EQ(config.at("feed_forward_proj"), kind == "glu" ? "gated-silu" : kind == "flan" ? "gated-gelu" : "relu");
  EXPECT_EQ(config.at("tie_word_embeddings"), kind == "v1");
  EXPECT_EQ(config.at("scale_decoder_outputs"), kind == "v1");  // transformers 5 reads this, not the tie
  EXPECT_EQ(config.at("num_decoder_layers"), 3);
}

}  // namespace

// T5 v1.0's layout: ReLU, the head tied to the shared embeddings.
TEST(ConvertT5, TiedReluModelMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  expect_t5_converts("v1");
}

// T5 v1.1's layout with a gated FFN (gated-silu: wi_0 the gate, wi_1 the
// linear half) and an untied lm_head, more decoder layers than encoder's.
TEST(ConvertT5, GatedUntiedModelMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  expect_t5_converts("glu");
}

// FLAN-T5's layout: gated-gelu, whose gate is GELU's tanh form (zoo's
// geglu_tanh), exact both ways; modelzoo's converter maps it to geglu.
TEST(ConvertT5, FlanGatedGeluMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  expect_t5_converts("flan");
}

// What zoo's t5 cannot be and what HF's T5 cannot hold (the Transformer's keys) are refused by name.
TEST(ConvertT5, UnrepresentableOptionsAreRefused) {
  const models::HfAdapter& a = models::find_hf_converter("t5");
  nlohmann::json c{{"model_type", "t5"}, {"vocab_size", 100}, {"d_model", 16},  {"d_kv", 4},
                   {"d_ff", 32},         {"num_layers", 1},   {"num_heads", 2}, {"feed_forward_proj", "gated-tanh"}};
  zoo::testing::expect_refused([&] { a.config_from_hf(c); }, {"feed_forward_proj", "gated-gelu"});
  c["feed_forward_proj"] = "relu";
  c["relative_attention_max_distance"] = 64;
  zoo::testing::expect_refused([&] { a.config_from_hf(c); }, {"relative_attention_max_distance"});
  c.erase("relative_attention_max_distance");
  // transformers scales the decoder output by d_model^-1/2 when scale_decoder_outputs says so (by the tie when
  // the field is absent); zoo's t5 scales exactly when tied: the two agreeing convert, differing is refused.
  for (const bool tied : {true, false}) {
    c["tie_word_embeddings"] = tied;
    c["scale_decoder_outputs"] = tied;
    EXPECT_EQ(a.config_from_hf(c)["share_embedding_weights"].as<bool>(), tied);
    c["scale_decoder_outputs"] = nullptr;
    EXPECT_EQ(a.config_from_hf(c)["share_embedding_weights"].as<bool>(), tied);
    c["scale_decoder_outputs"] = !tied;
    zoo::testing::expect_refused([&] { a.config_from_hf(c); },
                                 {"config.json: scale_decoder_outputs = " + std::string(tied ? "false" : "true"),
                                  "differs from tie_word_embeddings"});
  }
  c.erase("scale_decoder_outputs");
  c.erase("tie_word_embeddings");
  YAML::Node y = YAML::Load(zoo::testing::tiny_params_yaml("/d", "/m"));
  y.remove("train_input");
  y.remove("eval_input");
  y["model"] = YAML::Load(
      "{name: transformer, src_vocab_size: 100, d_model: 16, d_kv: 4, num_heads: 2, d_ff: 32, "
      "encoder_num_hidden_layers: 1, norm_type: layernorm, position_embedding_type: fixed, "
      "src_max_position_embeddings: 8, tgt_max_position_embeddings: 8}");
  Params p = params_from_node(y, "p.yaml", YAML::Node());
  zoo::testing::expect_refused([&] { a.config_to_hf(*p.model); },
                               {"model.norm_type = layernorm: Hugging Face's t5 normalizes with RMSNorm"});
}
