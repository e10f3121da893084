// BERT pre-training (modelzoo's bert model): logits and loss against a
// float64 forward written from the paper's math, training on BERT samples,
// and real configs built at their published sizes.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "data/processors/bert_csv.h"
#include "models/bert/bert.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/params/params.h"
#include "runner/run.h"
#include "runner/trainer.h"
#include "test_util.h"
#include "tests/bert_fixtures.h"

using namespace zoo;
using namespace zoo::models;
using zoo::testing::tiny_bert;

namespace {

// modelzoo's pre-training CSV as its create_csv scripts write it (Python's csv
// module, `tokens` as str(list)), in dir/csv: 2 files of 6 rows, vocab.txt
// lines "[PAD] [UNK] [CLS] [SEP] [MASK] w5 ... w29 ' , it's".
// Row r: [CLS] then 4 + r % 5 tokens, [SEP], 3 more, [SEP]; the tokens of
// rows 1 and 2 include a quote and a comma. Returns the vocab path.
std::string write_bert_csv(const zoo::testing::TempDir& dir) {
  const std::string script = zoo::testing::write_file(dir / "write_csv.py", zoo::testing::oracle("bert_write_csv.py"));
  const auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + (dir / "csv"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir / "csv/vocab.txt";
}

// An input section reading write_bert_csv's data; `set` adds or overrides keys.
std::string csv_input(const zoo::testing::TempDir& dir, const std::map<std::string, std::string>& set = {}) {
  std::map<std::string, std::string> keys = {{"data_processor", "BertCSVDynamicMaskDataProcessor"},
                                             {"data_dir", dir / "csv"},
                                             {"vocab_file", dir / "csv/vocab.txt"},
                                             {"batch_size", "4"},
                                             {"max_sequence_length", "16"},
                                             {"max_predictions_per_seq", "3"},
                                             {"shuffle", "false"}};
  for (const auto& [k, v] : set) keys[k] = v;
  std::string y;
  for (const auto& [k, v] : keys) y += (y.empty() ? "{" : ", ") + k + ": " + v;
  return y + "}";
}

// A float64 BERT written from Devlin et al. (and Vaswani et al.'s layers):
// reads {state, features, mlm_logits, nsp_logits, loss} and exits 1 when
// zoo's differ by more than 1e-5. Arguments: file heads kv_groups
// norm_first(0|1) mask_padding_positions(0|1) logits_scale sqrt|d rotary_dim.
// No NSP head in the state: masked LM only; a transformer_encoder.norm: a final norm.
std::string write_reference_bert(const zoo::testing::TempDir& dir) {
  return zoo::testing::write_file(dir / "bert_ref.py", zoo::testing::oracle("bert_reference.py"));
}

// A batch of 2 x 12 tokens, the second padded after 9, with 3 masked positions
// each; `left_padded`: the first row starts with 2 pads.
Features tiny_batch(bool left_padded = false) {
  torch::manual_seed(5);
  Features f;
  f["input_ids"] = torch::randint(1, 50, {2, 12}, torch::kLong);
  f["attention_mask"] = torch::ones({2, 12}, torch::kLong);
  f["attention_mask"][1].narrow(0, 9, 3).zero_();
  f["input_ids"][1].narrow(0, 9, 3).zero_();  // pad id 0
  if (left_padded) {
    f["attention_mask"][0].narrow(0, 0, 2).zero_();
    f["input_ids"][0].narrow(0, 0, 2).zero_();
  }
  f["token_type_ids"] = torch::cat({torch::zeros({2, 6}, torch::kLong), torch::ones({2, 6}, torch::kLong)}, 1);
  f["masked_lm_positions"] = torch::tensor({{left_padded ? 3 : 1, 4, 10}, {2, 7, 0}}, torch::kLong);
  f["labels"] = torch::randint(0, 50, {2, 3}, torch::kLong);
  f["masked_lm_mask"] = torch::tensor({{1, 1, 1}, {1, 1, 0}}, torch::kLong);  // the last slot of row 1 is padding
  f["next_sentence_label"] = torch::tensor({0, 1}, torch::kLong);
  return f;
}

void expect_reference(BertModel& m, const zoo::testing::TempDir& dir, const std::string& args, const std::string& label,
                      bool left_padded = false) {
  torch::manual_seed(11);
  m.reset_parameters();
  m.eval();
  const Features f = tiny_batch(left_padded);
  BertModel::Outputs out =
      m.run(f.at("input_ids"), f.at("attention_mask"), f.at("token_type_ids"), f.at("masked_lm_positions"));
  c10::impl::GenericDict features(c10::StringType::get(), c10::AnyType::get());
  for (const auto& [k, v] : f) features.insert(k, v);
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("state", ckpt::model_state_dict(m));
  d.insert("features", features);
  d.insert("mlm_logits", out.mlm_logits.narrow(-1, 0, 50).detach());
  d.insert("nsp_logits", out.nsp_logits.defined() ? out.nsp_logits.detach() : torch::zeros({0}));
  d.insert("loss", m.forward(f, false).loss.detach());
  ckpt::save_checkpoint_file(dir / "bert_case.pt", d);
  auto r = zoo::testing::run_command("/usr/bin/python3 " + write_reference_bert(dir) + " " + (dir / "bert_case.pt") +
                                     " " + args);
  EXPECT_EQ(r.exit_code, 0) << label << ": " << r.output;
}

}  // namespace

// BERT-base's shape (post-norm, segments, tied masked-LM output with its
// own bias, tanh pooler, NSP), a padded row: zoo's masked-LM and NSP logits
// and its loss (masked-LM sum / batch size * mlm_loss_weight + NSP) equal
// the float64 forward. Then pre-norm with a final norm, multi-query
// attention and rotary positions; RoBERTa's (no NSP, positions counted
// past the padding as Hugging Face counts them, left padding too); and muP's
// logits scale and scores / head size.
TEST(Bert, MatchesAnIndependentForward) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  zoo::testing::TempDir dir;
  {
    BertModel m(tiny_bert(), torch::TensorOptions());
    const auto state = ckpt::model_state_dict(m);
    EXPECT_TRUE(state.contains("model.bert_mlm_head.classifier.ffn.0.linear_layer.bias"));
    EXPECT_FALSE(state.contains("model.bert_mlm_head.classifier.ffn.0.linear_layer.weight"));  // tied
    EXPECT_TRUE(state.contains("model.bert_encoder.pooler.pooler.ffn.0.linear_layer.weight"));
    expect_reference(m, dir, "4 4 0 0 1 sqrt 0", "bert-base shape");
  }
  {
    BertOptions o = tiny_bert();
    o.norm_first = true;
    o.use_final_layer_norm = true;
    o.attention_module = "multiquery_attention";
    o.extra_attention_params.num_kv_groups = 2;
    o.position_embedding_type = "rotary";
    o.rotary_dim = 4;
    BertModel m(o, torch::TensorOptions());
    expect_reference(m, dir, "4 2 1 0 1 sqrt 4", "pre-norm, MQA, rotary");
  }
  {
    BertOptions o = tiny_bert();
    o.disable_nsp = true;
    o.mask_padding_in_positional_embed = true;
    o.share_embedding_weights = false;
    BertModel m(o, torch::TensorOptions());
    EXPECT_FALSE(ckpt::model_state_dict(m).contains("model.bert_encoder.embedding_layer.segment_embeddings.weight"));
    expect_reference(m, dir, "4 4 0 1 1 sqrt 0", "roberta");
    expect_reference(m, dir, "4 4 0 1 1 sqrt 0", "roberta, left padding: positions count the tokens", true);
  }
  {
    BertOptions o = tiny_bert();
    o.mup_base_hidden_size = 8;
    o.mup_base_filter_size = 12;
    o.output_logits_alpha = 2.0;
    BertModel m(o, torch::TensorOptions());
    expect_reference(m, dir, "4 4 0 0 0.5 d 0", "muP");  // 2 * 8 / 32
  }
}

// Padding changes nothing at the other positions: the same rows with more
// padding give the same masked-LM logits.
TEST(Bert, PaddingDoesNotReachOtherPositions) {
  torch::manual_seed(3);
  BertModel m(tiny_bert(), torch::TensorOptions());
  m.reset_parameters();
  m.eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor ids = torch::randint(1, 50, {1, 8}, torch::kLong), positions = torch::tensor({{0, 3, 7}});
  const torch::Tensor padded = torch::cat({ids, torch::zeros({1, 4}, torch::kLong)}, 1);
  const torch::Tensor mask = torch::cat({torch::ones({1, 8}), torch::zeros({1, 4})}, 1).to(torch::kLong);
  auto a = m.run(ids, torch::ones({1, 8}, torch::kLong), torch::zeros({1, 8}, torch::kLong), positions);
  auto b = m.run(padded, mask, torch::zeros({1, 12}, torch::kLong), positions);
  EXPECT_TRUE(torch::allclose(a.mlm_logits, b.mlm_logits, 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(a.nsp_logits, b.nsp_logits, 1e-5, 1e-5));
}

// activation_checkpointing (zoo's own key) recomputes each encoder layer in
// the backward pass: the same loss and gradients, dropout replayed.
TEST(Bert, ActivationCheckpointingGivesTheSameGradients) {
  torch::manual_seed(4);
  const torch::Tensor ids = torch::randint(1, 50, {2, 12}, torch::kLong);
  const models::Features batch{{"input_ids", ids},
                               {"attention_mask", torch::ones({2, 12}, torch::kLong)},
                               {"token_type_ids", torch::zeros({2, 12}, torch::kLong)},
                               {"labels", torch::randint(1, 50, {2, 12}, torch::kLong)},
                               {"masked_lm_mask", (torch::rand({2, 12}) < 0.3).to(torch::kLong)},
                               {"next_sentence_label", torch::tensor({0, 1}, torch::kLong)}};
  auto run = [&](bool recompute) {
    BertOptions o = tiny_bert();
    o.dropout_rate = 0.1;
    o.activation_checkpointing = recompute;
    torch::manual_seed(3);
    BertModel m(o, torch::dtype(torch::kDouble));
    m.reset_parameters();
    return zoo::testing::step_gradients(m, batch, 9);
  };
  zoo::testing::expect_same_step(run(false), run(true), 1e-12, 1e-10, 1e-12);
}

// repr() of a token list, quotes and commas included, reads back.
TEST(BertCsv, ParsesPythonTokenLists) {
  using data::parse_python_string_list;
  EXPECT_EQ(parse_python_string_list(R"(['[CLS]', "'", ',', "it's", 'a\\b', '\xe9', '[SEP]'])"),
            (std::vector<std::string>{"[CLS]", "'", ",", "it's", "a\\b", "\xc3\xa9", "[SEP]"}));
  EXPECT_EQ(parse_python_string_list("[]"), std::vector<std::string>{});
  EXPECT_EQ(data::split_csv_record(R"("['a', ""b""]","[0, 1]",1)"),
            (std::vector<std::string>{"['a', \"b\"]", "[0, 1]", "1"}));
  EXPECT_THROW(parse_python_string_list("['a' 'b']"), std::invalid_argument);
  EXPECT_THROW(parse_python_string_list("['a'"), std::invalid_argument);
}

// Unmasking a sample gives back the row's tokens; [CLS] and [SEP] are never
// masked; segments and next-sentence labels are the row's; 15% of the
// tokens (at least one, at most max_predictions_per_seq) are predicted;
// each epoch masks anew, and the stream is the same when read again.
TEST(BertCsv, ReadsModelzooCsvAndMasksAnewEachEpoch) {
  if (!zoo::testing::python_imports("/usr/bin/python3", "csv"))
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 is not installed";
  zoo::testing::TempDir dir;
  write_bert_csv(dir);
  auto loader = zoo::testing::open_loader(csv_input(dir));
  auto again = zoo::testing::open_loader(csv_input(dir));
  EXPECT_EQ(loader->batches_per_epoch(), 3);
  std::vector<torch::Tensor> epoch_ids[2];
  int64_t masked = 0, as_mask = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (int batch = 0; batch < 3; ++batch) {
      data::Features b = loader->next();
      EXPECT_TRUE(torch::equal(b.at("input_ids"), again->next().at("input_ids")));
      epoch_ids[epoch].push_back(b.at("input_ids"));
      for (int64_t r = 0; r < 4; ++r) {
        const int64_t row = batch * 4 + r, a = 4 + row % 5, n = a + 6;
        std::vector<int64_t> ids(b.at("input_ids")[r].data_ptr<int64_t>(),
                                 b.at("input_ids")[r].data_ptr<int64_t>() + 16);
        const int64_t predictions = b.at("masked_lm_mask")[r].sum().item<int64_t>();
        EXPECT_EQ(predictions, std::min<int64_t>(3, std::max<int64_t>(1, std::llround(0.15 * n)))) << row;
        for (int64_t k = 0; k < predictions; ++k) {
          const int64_t pos = b.at("masked_lm_positions")[r][k].item<int64_t>();
          masked++;
          as_mask += ids[pos] == 4;
          ids[pos] = b.at("labels")[r][k].item<int64_t>();
        }
        // the expected ids: [CLS]=2, [SEP]=3, wK=K, then ' , it's = 30, 31, 32
        std::vector<int64_t> expected = {2};
        for (int64_t k = 0; k < a; ++k) expected.push_back(5 + (row + k) % 25);
        if (row == 1) expected[2] = 30, expected[3] = 31;
        if (row == 2) expected[2] = 31, expected[3] = 32;
        expected.push_back(3);
        for (int64_t k = 0; k < 3; ++k) expected.push_back(5 + (2 * row + k) % 25);
        expected.push_back(3);
        expected.resize(16, 0);
        EXPECT_EQ(ids, expected) << "row " << row;
        EXPECT_EQ(b.at("attention_mask")[r].sum().item<int64_t>(), n);
        EXPECT_EQ(b.at("token_type_ids")[r].sum().item<int64_t>(), 4);  // the second segment and its [SEP]
        EXPECT_EQ(b.at("token_type_ids")[r][a + 2].item<int64_t>(), 1);
        EXPECT_EQ(b.at("next_sentence_label")[r].item<int64_t>(), row % 2);
      }
    }
  }
  EXPECT_GT(as_mask, masked / 2);  // 80% become [MASK]
  int64_t same = 0;
  for (int batch = 0; batch < 3; ++batch) same += torch::equal(epoch_ids[0][batch], epoch_ids[1][batch]);
  EXPECT_LT(same, 3) << "epoch 1 masked every batch as epoch 0";
}

// Bad data is named: a missing meta.dat, a token outside the vocabulary's
// special tokens, a row longer than max_sequence_length with NSP (cut without).
TEST(BertCsv, BadDataIsNamed) {
  if (!zoo::testing::python_imports("/usr/bin/python3", "csv"))
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 is not installed";
  zoo::testing::TempDir dir;
  write_bert_csv(dir);
  auto error = [&](const std::map<std::string, std::string>& set) {
    try {
      zoo::testing::open_loader(csv_input(dir, set))->next();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error({{"mask_token", "'[MSK]'"}}).find("mask_token: '[MSK]' is not in vocab_file"), std::string::npos)
      << error({{"mask_token", "'[MSK]'"}});
  const std::string long_rows = error({{"max_sequence_length", "10"}});
  EXPECT_NE(long_rows.find("part_0.csv, row 2: 11 tokens, more than max_sequence_length 10"), std::string::npos)
      << long_rows;
  EXPECT_EQ(error({{"max_sequence_length", "10"}, {"disable_nsp", "true"}}), "");
  std::filesystem::remove(dir / "csv/meta.dat");
  EXPECT_NE(error({}).find("meta.dat: missing"), std::string::npos) << error({});
}

// BertCSVDataProcessor's rows, masked ahead of time, become batches as
// written (masked_lm_weights as masked_lm_mask); rows of other lengths and
// missing columns are named.
TEST(BertCsv, StaticRowsReadAsWritten) {
  if (!zoo::testing::python_imports("/usr/bin/python3", "csv"))
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 is not installed";
  zoo::testing::TempDir dir;
  const std::string script = zoo::testing::write_file(dir / "static.py", zoo::testing::oracle("bert_static.py"));
  ASSERT_EQ(zoo::testing::run_command("/usr/bin/python3 " + script + " " + (dir / "csv")).exit_code, 0);
  data::Features b = zoo::testing::open_loader("{data_processor: BertCSVDataProcessor, data_dir: " + (dir / "csv") +
                                               ", batch_size: 4, max_sequence_length: 6, vocab_file: v.txt}")
                         ->next();
  EXPECT_TRUE(torch::equal(b.at("input_ids")[3], torch::tensor({2, 13, 4, 3, 0, 0}, torch::kLong)));
  EXPECT_TRUE(torch::equal(b.at("labels").select(1, 0), torch::tensor({20, 21, 22, 23}, torch::kLong)));
  EXPECT_TRUE(torch::equal(b.at("masked_lm_mask")[0], torch::tensor({1, 0}, torch::kLong)));
  EXPECT_TRUE(torch::equal(b.at("next_sentence_label"), torch::tensor({0, 1, 0, 1}, torch::kLong)));
  EXPECT_EQ(b.at("token_type_ids")[1].sum().item<int64_t>(), 2);
  std::string text = zoo::testing::read_file(dir / "csv/a.csv");
  text.replace(text.rfind("[2, 13, 4, 3, 0, 0]"), 19, "[2, 13, 4, 3, 0]");
  zoo::testing::write_file(dir / "csv/a.csv", text);
  std::string error;
  try {
    zoo::testing::open_loader("{data_processor: BertCSVDataProcessor, data_dir: " + (dir / "csv") + ", batch_size: 4}")
        ->next();
  } catch (const std::exception& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("a.csv, row 4: input_ids has 5 values where the batch's first row has 6"), std::string::npos)
      << error;
}

// As modelzoo's bert set_defaults: the model's disable_nsp reaches the input
// sections that leave it out (RoBERTa's masked-LM-only CSV files have no
// segment_ids column); an input that says otherwise is an error naming both.
TEST(Bert, TheModelsDisableNspReachesTheInputSections) {
  zoo::testing::TempDir dir;
  YAML::Node y = YAML::Load(zoo::testing::tiny_params_yaml("/d", "/m"));
  y.remove("eval_input");
  y["train_input"] = YAML::Load(csv_input(dir));
  y["model"] = YAML::Load(
      "{vocab_size: 32, hidden_size: 32, num_hidden_layers: 1, num_heads: 4, filter_size: 48, "
      "max_position_embeddings: 16, disable_nsp: true, mask_padding_in_positional_embed: true}");
  const Params p = params_from_node(y, "p.yaml", YAML::Node());
  const std::vector<std::string>& produced = p.train_input->produces();
  EXPECT_EQ(std::count(produced.begin(), produced.end(), "token_type_ids"), 0);
  EXPECT_EQ(std::count(produced.begin(), produced.end(), "next_sentence_label"), 0);
  EXPECT_TRUE(p.resolved()["train_input"]["disable_nsp"].as<bool>());
  y["train_input"]["disable_nsp"] = false;  // params_from_node left y as it was
  try {
    params_from_node(y, "p.yaml", YAML::Node());
    ADD_FAILURE() << "an input with NSP for a model without it";
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("train_input.disable_nsp: is false but the model's disable_nsp is true"),
              std::string::npos)
        << e.what();
  }
}

// A modelzoo BERT config (its model section, shrunk) trains on modelzoo's
// CSV data: the loss falls, eval reports the masked-LM and NSP metrics, and
// the run resumes from its checkpoint.
TEST(Bert, TrainsOnModelzooCsvData) {
  if (!zoo::testing::python_imports("/usr/bin/python3", "csv"))
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 is not installed";
  zoo::testing::TempDir dir;
  write_bert_csv(dir);
  const std::string input =
      csv_input(dir, {{"shuffle", "true"}, {"shuffle_seed", "3"}, {"max_predictions_per_seq", "4"}});
  const std::string params =
      zoo::testing::write_file(dir / "p.yaml", "train_input: " + input + "\neval_input: " + input + R"(
model:
  vocab_size: 33
  hidden_size: 32
  num_hidden_layers: 2
  num_heads: 4
  filter_size: 64
  encoder_nonlinearity: gelu
  pooler_nonlinearity: tanh
  dropout_rate: 0.0
  attention_dropout_rate: 0.0
  max_position_embeddings: 16
  layer_norm_epsilon: 1.0e-05
  mlm_loss_weight: 0.5
optimizer:
  optimizer_type: AdamW
  learning_rate: 0.005
  max_gradient_norm: 1.0
runconfig:
  seed: 1
  max_steps: 160
  log_steps: 1
  eval_steps: 3
  eval_frequency: 160
  checkpoint_steps: 80
)");
  auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params +
                                     " --mode train_and_eval --model_dir " + (dir / "m"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<double> losses = zoo::testing::train_losses(r.output);
  ASSERT_EQ(losses.size(), 160u) << r.output;
  const double first = (losses[0] + losses[1] + losses[2]) / 3, last = (losses[157] + losses[158] + losses[159]) / 3;
  EXPECT_LT(last, 0.75 * first) << first << " -> " << last;
  for (const char* metric : {"eval/accuracy_masked_lm = ", "eval/mlm_perplexity = ", "eval/accuracy_cls = "})
    EXPECT_NE(r.output.find(metric), std::string::npos) << metric << "\n" << r.output;
  // Resuming from step 80 repeats steps 81..160 (the masks are drawn from the seed, epoch and row).
  auto resumed =
      zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params + " --mode train --model_dir " +
                                (dir / "m2") + " --checkpoint_path " + (dir / "m/checkpoint_80.mdl"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const std::vector<double> again = zoo::testing::train_losses(resumed.output);
  ASSERT_EQ(again.size(), 80u) << resumed.output;
  for (size_t k = 0; k < 80; ++k) EXPECT_NEAR(again[k], losses[80 + k], 1e-4 * losses[80 + k]) << "step " << 81 + k;
}

// modelzoo's BERT-base and BERT-large configs build Hugging Face's
// BertForPreTraining sizes (bert-base-uncased 110,106,428; bert-large-uncased
// 336,226,108); its RoBERTa config has no segments, pooler or NSP head.
TEST(Bert, RealConfigsHaveTheirPublishedSizes) {
  const std::string dir = zoo::testing::modelzoo_configs_dir() + "/";
  Params base = load_params(dir + "transformers_pytorch_bert_bert_base_MSL128.yaml", YAML::Node());
  EXPECT_EQ(base.model_name, "bert");
  EXPECT_EQ(summarize_model(base).parameters, 110106428);
  Params roberta = load_params(dir + "transformers_pytorch_bert_roberta_base.yaml", YAML::Node());
  const auto& o = dynamic_cast<const BertSpec&>(*roberta.model).options();
  EXPECT_TRUE(o.disable_nsp);
  // C = 768, 12 layers, F = 3072: embeddings (V + 513 positions) C + 2C, layers, the MLM transform and bias.
  const int64_t C = 768, F = 3072, V = o.vocab_size;
  EXPECT_EQ(summarize_model(roberta).parameters,
            (V + 513) * C + 2 * C + 12 * (4 * C * C + 4 * C + 2 * C * F + F + C + 4 * C) + C * C + C + 2 * C + V);
}
