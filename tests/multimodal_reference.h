// Shared by the multimodal families' tests (LLaVA, multimodal_simple):
// expect_model_error, write_test_images, expect_frozen_exactly,
// expect_trains_all_but_frozen, kReferenceTextModel, and
// kMultimodalReferenceLayers, the parts of a float64 forward pass written in
// Python from modelzoo's layers that both use, to be followed by each
// family's own glue. The case file (argv[1],
// torch.load) holds the model's `state` and the batch; argv[2] is JSON
// options with at least `rotary_dim`.
// - vit(images, prefix, hidden, heads, conv, last, final_norm): modelzoo's
//   ViTModel on 8 x 8 images in 4 x 4 patches (ViTEmbeddingLayer: patches,
//   [CLS], learned positions, post-embedding LayerNorm; pre-norm encoder
//   layers 0 .. last with quick_gelu; the final norm when asked).
// - llama_logits(h, key_padding_mask): the 2-layer decoder of 3 heads:
//   RMSNorm, rotary (zoo's pair layout), swiglu, key_padding_mask added as
//   finfo.min and the causal mask as -inf, the LM head.
// - check(logits): exits 0 when zoo's logits and its loss over the loss
//   mask (GPTLMHeadModelLoss, num_tokens) agree with these to 1e-6 (zoo
//   rotates q and k in float32, ~1e-8 off).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "data/image.h"
#include "models/registry.h"
#include "runner/checkpoint/checkpoint.h"
#include "test_util.h"

namespace zoo::testing {

// Parsing `yaml` as family `family`'s model section fails with a
// config::ConfigError whose message names `key` and says `what`.
inline void expect_model_error(const std::string& family, const std::string& yaml, const std::string& key,
                               const std::string& what) {
  try {
    models::find_model(family).parse(YAML::Load(yaml), config::Context{"m.yaml", "model"});
    ADD_FAILURE() << "accepted: " << yaml;
  } catch (const config::ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(key), std::string::npos) << m;
    EXPECT_NE(m.find(what), std::string::npos) << m;
  }
}

// The images both families' data tests name: images/sub/wide.png (6 x 10)
// and images/square.png (8 x 8), random pixels.
inline void write_test_images(const TempDir& dir) {
  std::filesystem::create_directories(dir / "images/sub");
  data::write_png(dir / "images/sub/wide.png", torch::randint(0, 256, {3, 6, 10}, torch::kByte));
  data::write_png(dir / "images/square.png", torch::randint(0, 256, {3, 8, 8}, torch::kByte));
}

// Between two checkpoints of one run: the weights under `frozen_prefix`
// (e.g. "model.image_model.") are bit-identical, and every other one moved.
inline void expect_frozen_exactly(const std::string& before_path, const std::string& after_path,
                                  const std::string& frozen_prefix) {
  const auto before = ckpt::model_weights(ckpt::load_checkpoint_file(before_path), "ckpt");
  const auto after = ckpt::model_weights(ckpt::load_checkpoint_file(after_path), "ckpt");
  for (const auto& item : before) {
    const std::string key = item.key().toStringRef();
    const bool same = torch::equal(item.value().toTensor(), after.at(key).toTensor());
    EXPECT_EQ(same, key.rfind(frozen_prefix, 0) == 0) << key;
  }
}

// Trains, from a Trainer-format file laid out as modelzoo's multimodal
// phase-2 files, `model` (the lines of trainer.init.model, each indented
// six spaces) on `train_dataloader` (a flow mapping) for 30 steps: AdamW at
// 0.01, clipping at 1.0, micro-batches of 2, checkpoints at steps 0 and 30.
// Expects the loss to halve, exactly the weights under `frozen_prefix` to
// stay as they were, and a run stopped at step 15 and resumed to log the
// uninterrupted run's losses (the same samples, transforms and updates).
inline void expect_trains_all_but_frozen(const TempDir& dir, const std::string& model,
                                         const std::string& train_dataloader, const std::string& frozen_prefix) {
  const std::string params = write_file(dir / "params.yaml", R"(
trainer:
  init:
    seed: 1
    backend: {backend_type: CPU}
    model:
)" + model + R"(
    optimizer:
      AdamW: {betas: [0.9, 0.999], eps: 1.0e-08, weight_decay: 0.01, correct_bias: true}
    schedulers:
    - ConstantLR: {learning_rate: 0.01}
    precision: {max_gradient_norm: 1.0}
    loop: {max_steps: 30}
    checkpoint: {steps: 30, save_initial_checkpoint: true}
    logging: {log_steps: 5}
    callbacks:
    - ScopedTrainFlags: {csx.performance.micro_batch_size: 2}
    - ComputeNorm: {}
  fit:
    train_dataloader: )" + train_dataloader + "\n");
  const auto r = run_command(zoo_binary() + " CPU --params " + params + " --mode train --model_dir " + (dir / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<double> losses = train_losses(r.output);
  ASSERT_EQ(losses.size(), 6u) << r.output;
  EXPECT_LT(losses.back(), 0.5 * losses.front()) << r.output;
  expect_frozen_exactly(dir / "run/checkpoint_0.mdl", dir / "run/checkpoint_30.mdl", frozen_prefix);
  const std::string resumed_run =
      zoo_binary() + " CPU --params " + params + " --mode train --model_dir " + (dir / "resumed");
  const auto first = run_command(resumed_run + " --max_steps 15");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto rest = run_command(resumed_run + " --max_steps 30");
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  std::vector<double> resumed = train_losses(first.output);
  for (double l : train_losses(rest.output)) resumed.push_back(l);
  EXPECT_EQ(resumed, losses) << first.output << rest.output;
}

// The text tower kMultimodalReferenceLayers' llama_logits computes: a
// LLaMA-style decoder of 2 layers and 3 heads, vocabulary 37, width 12.
inline const char* const kReferenceTextModel =
    "text_model: {name: LlamaModel, vocab_size: 37, hidden_size: 12, num_hidden_layers: 2, num_heads: 3, "
    "filter_size: 20, max_position_embeddings: 16, position_embedding_type: rotary, rotary_dim: 4, "
    "norm_type: rmsnorm, nonlinearity: swiglu, use_projection_bias_in_attention: false, "
    "use_ffn_bias_in_attention: false, use_ffn_bias: false, use_bias_in_output: false, share_embedding_weights: false, "
    "dropout_rate: 0.0, embedding_dropout_rate: 0.0, attention_dropout_rate: 0.0, layer_norm_epsilon: 1.0e-5, "
    "extra_ffn_params: {static_dual_expert: false}}";

inline const std::string kMultimodalReferenceLayers = zoo::testing::oracle("multimodal_reference_prelude.py");

}  // namespace zoo::testing
