// BERT extractive summarization (modelzoo's bert/extractive_summarization,
// BERTSUM, with BertSumCSVDataProcessor): the data padded as modelzoo's
// create_bertsum_feature, the [CLS] states gathered and scored with
// modelzoo's loss, training from a legacy config, and the model's size.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/loader.h"
#include "data/registry.h"
#include "models/bert/summarizer.h"
#include "runner/params/params.h"
#include "runner/run.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

// [PAD] is id 0, [CLS] 2, [SEP] 3; "great" 8, "bad" 9.
std::string write_vocab(const TempDir& dir) {
  return zoo::testing::write_file(dir / "vocab.txt",
                                  "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nfilm\nwas\ngreat\nbad\nman\n");
}

// Rows as modelzoo's BERTSUM preparation writes them (columns input_token_ids,
// labels, segment_ids, cls_indices), listed in meta.dat.
void write_rows(const TempDir& dir, const std::vector<std::string>& rows) {
  std::filesystem::create_directories(dir / "sum");
  std::string csv = "input_token_ids,labels,segment_ids,cls_indices\n";
  for (const auto& r : rows) csv += r + "\n";
  zoo::testing::write_file(dir / "sum/part.csv", csv);
  zoo::testing::write_file(dir / "sum/meta.dat", "part.csv " + std::to_string(rows.size()) + "\n");
}

}  // namespace

// Each feature padded to its length with [PAD]'s id, attention_mask and
// cls_weights 1 where there is a token or a sentence: as modelzoo's
// create_bertsum_feature computes them.
TEST(BertSum, DataIsPaddedAsModelzoosFeature) {
  TempDir dir;
  write_vocab(dir);
  write_rows(dir, {"\"[2, 8, 3, 2, 9, 6, 3]\",\"[1, 0]\",\"[0, 0, 0, 1, 1, 1, 1]\",\"[0, 3]\"",
                   "\"[2, 5, 6, 3]\",\"[1]\",\"[0, 0, 0, 0]\",\"[0]\""});
  auto loader = zoo::testing::open_loader(
      "data_processor: BertSumCSVDataProcessor\ndata_dir: " + (dir / "sum") + "\nvocab_file: " + (dir / "vocab.txt") +
      "\nmax_sequence_length: 8\nmax_cls_tokens: 3\nbatch_size: 2\nshuffle: false\n");
  models::Features b = loader->next();
  auto expect = [&](const char* name, std::vector<std::vector<double>> rows) {
    torch::Tensor want = torch::zeros({2, int64_t(rows[0].size())}, torch::kDouble);
    for (size_t i = 0; i < rows.size(); ++i)
      for (size_t j = 0; j < rows[i].size(); ++j) want[int64_t(i)][int64_t(j)] = rows[i][j];
    EXPECT_TRUE(torch::equal(b.at(name).to(torch::kDouble), want)) << name << ":\n" << b.at(name);
  };
  expect("input_ids", {{2, 8, 3, 2, 9, 6, 3, 0}, {2, 5, 6, 3, 0, 0, 0, 0}});
  expect("attention_mask", {{1, 1, 1, 1, 1, 1, 1, 0}, {1, 1, 1, 1, 0, 0, 0, 0}});
  expect("token_type_ids", {{0, 0, 0, 1, 1, 1, 1, 0}, {0, 0, 0, 0, 0, 0, 0, 0}});
  expect("labels", {{1, 0, 0}, {1, 0, 0}});
  expect("cls_indices", {{0, 3, 0}, {0, 0, 0}});
  // modelzoo's quirk, kept: padding is [PAD]'s id 0, so a [CLS] at position 0 weighs 0 too.
  expect("cls_weights", {{0, 1, 0}, {0, 0, 0}});
  EXPECT_EQ(b.at("cls_weights").scalar_type(), torch::kFloat);
}

// The logits are the classifier on the encoder's states at cls_indices; the
// loss is modelzoo's: cross-entropy weighted by cls_weights, summed / batch
// size * loss_weight.
TEST(BertSum, LogitsScoreTheClsStatesWithModelzoosLoss) {
  models::BertSummarizerOptions o;
  o.vocab_size = 12;
  o.hidden_size = 16;
  o.num_hidden_layers = 1;
  o.num_heads = 2;
  o.filter_size = 32;
  o.max_position_embeddings = 8;
  o.dropout_rate = 0.0;
  o.attention_dropout_rate = 0.0;
  o.loss_weight = 0.25;
  models::BertSummarizerModel m(o, torch::TensorOptions());
  torch::manual_seed(4);
  m.reset_parameters();
  m.eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = torch::randint(0, 12, {2, 8}, torch::kLong);
  const torch::Tensor mask = torch::ones({2, 8}, torch::kLong), types = torch::zeros({2, 8}, torch::kLong);
  const torch::Tensor cls = torch::tensor({3, 6, 1, 0, 5, 7}, torch::kLong).view({2, 3});
  const torch::Tensor weights = torch::tensor({1.0f, 1.0f, 0.0f, 1.0f, 1.0f, 1.0f}).view({2, 3});
  const torch::Tensor labels = torch::tensor({1, 0, 0, 0, 1, 1}, torch::kLong).view({2, 3});
  const torch::Tensor states = m.bert->forward(ids, mask, types).first;
  const torch::Tensor logits = m.logits(ids, mask, types, cls);
  double loss = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t s = 0; s < 3; ++s) {
      torch::Tensor expected = m.classifier(states[b][cls[b][s].item<int64_t>()]);
      EXPECT_TRUE(torch::allclose(logits[b][s], expected, 1e-6, 1e-6)) << b << "," << s;
      const torch::Tensor logp = torch::log_softmax(expected, -1);
      loss -= weights[b][s].item<double>() * logp[labels[b][s].item<int64_t>()].item<double>();
    }
  models::Features batch{{"input_ids", ids},   {"attention_mask", mask}, {"token_type_ids", types},
                         {"cls_indices", cls}, {"cls_weights", weights}, {"labels", labels}};
  models::ModelOutput out = m.forward(batch, true);
  EXPECT_NEAR(out.loss.item<double>(), loss / 2 * 0.25, 1e-6);
  EXPECT_DOUBLE_EQ(out.metrics.at("accuracy").count.item<double>(), 5.0);  // the weighted sentences
}

// A legacy config in modelzoo's shape (no model.name: use_cls_bias picks the
// summarizer; the input sections take the model's vocab_file) learns which
// sentences to keep: the loss falls and eval accuracy reaches 1.
TEST(BertSum, TrainsFromALegacyConfig) {
  TempDir dir;
  write_vocab(dir);
  std::vector<std::string> rows;  // keep the sentence that says "great"
  for (int i = 0; i < 8; ++i)
    rows.push_back(i % 2 ? "\"[2, 8, 6, 3, 2, 9, 6, 3]\",\"[1, 0]\",\"[0, 0, 0, 0, 1, 1, 1, 1]\",\"[0, 4]\""
                         : "\"[2, 9, 6, 3, 2, 8, 6, 3]\",\"[0, 1]\",\"[0, 0, 0, 0, 1, 1, 1, 1]\",\"[0, 4]\"");
  write_rows(dir, rows);
  const std::string input = "  data_processor: BertSumCSVDataProcessor\n  data_dir: " + (dir / "sum") +
                            "\n  max_sequence_length: 8\n  max_cls_tokens: 2\n  batch_size: 4\n  shuffle: false\n"
                            "  pad_id: 5\n";  // not [PAD]: the [CLS] at position 0 keeps its weight
  const std::string params =
      zoo::testing::write_file(dir / "sum.yaml", "train_input:\n" + input + "eval_input:\n" + input + R"(model:
  vocab_size: 12
  vocab_file: )" + (dir / "vocab.txt") + R"(
  hidden_size: 32
  num_hidden_layers: 2
  num_heads: 4
  filter_size: 64
  max_position_embeddings: 8
  use_cls_bias: true
  dropout_rate: 0.0
  attention_dropout_rate: 0.0
  pooler_nonlinearity: tanh
  loss_weight: 0.5
optimizer:
  optimizer_type: AdamW
  max_gradient_norm: 1.0
  learning_rate:  # decaying: at a constant 0.005 Adam's steps on a near-zero loss can spike it back up
    - {scheduler: Linear, initial_learning_rate: 0.005, end_learning_rate: 0.0, total_iters: 100}
runconfig:
  seed: 1
  max_steps: 100
  log_steps: 1
  eval_steps: 2
  eval_frequency: 100
  checkpoint_steps: 100
)");
  auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params +
                                     " --mode train_and_eval --model_dir " + (dir / "m"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("so zoo builds bert/extractive_summarization"), std::string::npos) << r.output;
  const std::vector<double> losses = zoo::testing::train_losses(r.output);
  ASSERT_EQ(losses.size(), 100u) << r.output;
  EXPECT_LT(losses.back(), 0.1 * losses.front()) << losses.front() << " -> " << losses.back();
  EXPECT_NE(r.output.find("eval/accuracy = 1"), std::string::npos) << r.output;
}

// modelzoo 2.2+'s BERT-base summarizer shape: BERT-base without the pooler,
// 1532 positions, and a 2-way classifier with its bias; ROUGE is refused.
TEST(BertSum, SizeAndRefusedRouge) {
  TempDir dir;
  const std::string base = zoo::testing::tiny_params_yaml("/d", "/m");
  YAML::Node y = YAML::Load(base);
  y["model"] = YAML::Load(
      "{name: bert/extractive_summarization, vocab_size: 30522, hidden_size: 768, "
      "num_hidden_layers: 12, num_heads: 12, filter_size: 3072, max_position_embeddings: 1532, "
      "use_cls_bias: true}");
  y.remove("train_input");
  y.remove("eval_input");
  Params p = params_from_node(y, "p.yaml", YAML::Node());
  const int64_t C = 768, F = 3072, L = 12;
  EXPECT_EQ(summarize_model(p).parameters,
            (30522 + 1532 + 2) * C + 2 * C + L * (4 * (C * C + C) + 2 * C * F + F + C + 4 * C) + 2 * C + 2);
  y["model"]["compute_eval_metrics"] = true;
  try {
    params_from_node(y, "p.yaml", YAML::Node());
    ADD_FAILURE() << "ROUGE accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("model.compute_eval_metrics: ROUGE is not supported"), std::string::npos)
        << e.what();
  }
}
