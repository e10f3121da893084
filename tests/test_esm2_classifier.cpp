// ESM-2 sequence classification (models/bert/esm2_classifier, modelzoo 2.3's
// esm2/classification): the head's arithmetic, a legacy config in modelzoo's
// layout training on DeepLoc-style BertCSVDataProcessor rows (one label per
// row, no NSP columns) with accuracy and F1 in eval, and fine-tuning from an
// ESM-2 pre-training checkpoint with checkpoints in modelzoo's key layout.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <regex>

#include "models/bert/esm2_classifier.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/params/params.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

// The model section of modelzoo 2.3's ESM-2 classifier configs, shrunk.
const char* const kClassifierModel = R"(model:
  attention_dropout_rate: 0.0
  disable_nsp: true
  dropout_rate: 0.0
  embedding_layer_norm: false
  encoder_nonlinearity: gelu
  filter_size: 32
  hidden_size: 16
  initializer_range: 0.02
  layer_norm_epsilon: 1.0e-05
  mask_token_id: 32
  max_position_embeddings: 24
  num_heads: 2
  num_hidden_layers: 2
  pad_token_id: 1
  position_embedding_type: rotary
  rotary_dim: 8
  share_embedding_weights: true
  token_dropout: true
  use_final_layer_norm: true
  vocab_size: 33
  num_labels: 2
  freeze_pretrained_model: False
  compute_eval_metrics: True
  classifier_dropout: 0.4
)";

// A data_dir as deeploc2_data.py writes it (plus the meta.dat modelzoo's
// processor reads): input_ids and attention_mask as Python lists padded
// with 1 / 0, and one label; sequences of amino acid 5 are label 0, of 7
// label 1 (with a few other residues mixed in).
void write_rows(const std::string& dir, int rows, unsigned seed) {
  std::filesystem::create_directories(dir);
  std::mt19937 rng(seed);
  std::string csv = "input_ids,attention_mask,labels\n";
  for (int r = 0; r < rows; ++r) {
    const int label = r % 2, length = 10 + int(rng() % 12);
    std::string ids = "\"[0", mask = "\"[1";
    for (int t = 1; t < 24; ++t) {
      const int id = t == length - 1 ? 2 : t < length ? (rng() % 4 == 0 ? 10 + int(rng() % 8) : (label ? 7 : 5)) : 1;
      ids += ", " + std::to_string(id);
      mask += t < length ? ", 1" : ", 0";
    }
    csv += ids + "]\"," + mask + "]\"," + std::to_string(label) + "\n";
  }
  zoo::testing::write_file(dir + "/rows.csv", csv);
  zoo::testing::write_file(dir + "/meta.dat", "rows.csv " + std::to_string(rows) + "\n");
}

std::string classifier_params(const std::string& data, const std::string& runconfig) {
  auto input = [&](const std::string& split) {
    return "  data_processor: BertCSVDataProcessor\n  data_dir: " + data + "/" + split +
           "\n  batch_size: 8\n  shuffle: True\n  shuffle_seed: 1\n";
  };
  return "train_input:\n" + input("train") + "eval_input:\n" + input("test") + kClassifierModel +
         "optimizer:\n  optimizer_type: Adam\n  learning_rate: 0.003\nrunconfig:\n  seed: 1\n" + runconfig;
}

Params params_of(const std::string& yaml) {
  return params_from_node(config::load_yaml_string(yaml, "esm.yaml"), "esm.yaml", YAML::Node());
}

}  // namespace

// logits = W_c gelu(W_p h[:, 0] + b_p) + b_c over the encoder's output h
// (dropout off in eval).
TEST(Esm2Classifier, LogitsAreTheHeadOverTheFirstTokensState) {
  const Params p = params_of(classifier_params("/d", ""));
  EXPECT_EQ(p.model_name, "esm2/classification");
  torch::manual_seed(3);
  auto model = std::dynamic_pointer_cast<models::Esm2ClassifierModel>(p.model->build(torch::TensorOptions()));
  ASSERT_TRUE(model);
  model->eval();
  const torch::Tensor ids = torch::randint(4, 30, {3, 12}, torch::kLong), mask = torch::ones({3, 12}, torch::kLong);
  torch::NoGradGuard no_grad;
  const torch::Tensor h = model->esm2->bert_encoder->forward(ids, mask, torch::Tensor()).first.select(1, 0);
  const torch::Tensor pre = h.matmul(model->pooler->weight.t()) + model->pooler->bias;
  const torch::Tensor pooled = 0.5 * pre * (1 + torch::erf(pre / std::sqrt(2.0)));
  const torch::Tensor expected = pooled.matmul(model->classifier->weight.t()) + model->classifier->bias;
  EXPECT_TRUE(torch::allclose(model->logits(ids, mask), expected, 1e-5, 1e-6));
  EXPECT_EQ(model->logits(ids, mask).sizes(), (std::vector<int64_t>{3, 2}));
}

// The legacy file names no model: its keys make it esm2/classification; its
// input sections leave disable_nsp unset and the rows have no NSP columns.
TEST(Esm2Classifier, TrainsOnDeepLocRowsAndReportsAccuracyAndF1) {
  TempDir dir;
  write_rows(dir / "data/train", 96, 1);
  write_rows(dir / "data/test", 32, 2);
  const std::string params = zoo::testing::write_file(
      dir / "p.yaml", classifier_params(dir / "data", "  num_steps: 60\n  log_steps: 1\n  eval_frequency: 60\n"));
  auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params +
                                     " --mode train_and_eval --model_dir " + (dir / "m"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("so zoo builds esm2/classification"), std::string::npos) << r.output;
  const std::vector<double> losses = zoo::testing::train_losses(r.output);
  ASSERT_EQ(losses.size(), 60u) << r.output;
  const auto [first, last] = zoo::testing::first_and_last_means(losses, 10);
  EXPECT_LT(last, 0.5 * first) << first << " -> " << last;
  const std::string csv = zoo::testing::read_file(dir / "m/eval/results.csv");
  EXPECT_NE(csv.find("accuracy"), std::string::npos) << csv;
  EXPECT_NE(csv.find("f1_score"), std::string::npos) << csv;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("accuracy = ([0-9.]+)"))) << r.output;
  EXPECT_GE(std::stod(m[1]), 0.9) << r.output;
}

// Fine-tuning as modelzoo's README says: an ESM-2 pre-training checkpoint,
// load_checkpoint_states: model, non-strict (the head is new). With
// freeze_pretrained_model the encoder keeps the loaded weights; the saved
// checkpoint holds it under model.bert_encoder.* and, as modelzoo's does,
// classifier.bert_encoder.*, and loads back strictly.
TEST(Esm2Classifier, FineTunesFromAnEsm2CheckpointInModelzoosKeyLayout) {
  TempDir dir;
  write_rows(dir / "data/train", 32, 3);
  write_rows(dir / "data/test", 16, 4);
  std::string pretraining = classifier_params(dir / "data", "");
  for (const char* key : {"  num_labels: 2\n", "  freeze_pretrained_model: False\n", "  classifier_dropout: 0.4\n"})
    pretraining.replace(pretraining.find(key), std::string(key).size(), "");
  const Params esm2 = params_of(pretraining);
  ASSERT_EQ(esm2.model_name, "esm2");
  auto pretrained = esm2.model->build(torch::TensorOptions());
  const std::string ckpt_path = dir / "esm2.mdl";
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("model", ckpt::model_state_dict(*pretrained));
  ckpt::save_checkpoint_file(ckpt_path, d);

  std::string yaml =
      classifier_params(dir / "data", "  num_steps: 4\n  checkpoint_steps: 4\n  checkpoint_path: " + ckpt_path +
                                          "\n  load_checkpoint_states: model\n"
                                          "  disable_strict_checkpoint_loading: true\n");
  yaml.replace(yaml.find("freeze_pretrained_model: False"), 30, "freeze_pretrained_model: True");
  const std::string params = zoo::testing::write_file(dir / "p.yaml", yaml);
  auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params + " --mode train -o " +
                                     (dir / "m"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("missing model keys: classifier.bert_pooler.pooler.ffn.0.linear_layer.bias"),
            std::string::npos)
      << r.output;

  const c10::impl::GenericDict saved = ckpt::model_weights(ckpt::load_checkpoint_file(dir / "m/checkpoint_4.mdl"), "");
  const std::string key = "bert_encoder.transformer_encoder.layers.0.self_attn.proj_q_dense_layer.weight";
  const torch::Tensor loaded = d.at("model").toGenericDict().at("model." + key).toTensor();
  EXPECT_TRUE(torch::equal(saved.at("model." + key).toTensor(), loaded)) << "frozen: as loaded";
  EXPECT_TRUE(torch::equal(saved.at("classifier." + key).toTensor(), loaded)) << "modelzoo's second name";
  EXPECT_TRUE(saved.contains("classifier.classifier.weight"));
  r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params + " --mode eval -o " +
                                (dir / "m") + " --checkpoint_path " + (dir / "m/checkpoint_4.mdl"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}
