// BERT fine-tuned for sequence classification (modelzoo's bert/classifier
// with SST2DataProcessor / MNLIDataProcessor) and token classification
// (bert/token_classifier with BertTokenClassifierDataProcessor): WordPiece
// against BERT's tokenizer written in Python, GLUE rows encoded as BERT's
// paper says, and both heads trained and evaluated from modelzoo-style configs.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "data/processors/glue.h"
#include "data/text/wordpiece.h"
#include "models/bert/classifier.h"
#include "models/bert/token_classifier.h"
#include "runner/params/params.h"
#include "runner/run.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

bool have_python() { return zoo::testing::python_imports("/usr/bin/python3", "unicodedata"); }

// A vocabulary of specials, whole words and ## pieces, one per line.
std::string write_vocab(const TempDir& dir) {
  return zoo::testing::write_file(
      dir / "vocab.txt",
      "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nfilm\nwas\ngreat\nbad\nun\n##aff\n##able\n##s\ncafe\nnaive\n"
      "a\nman\nsleeps\nis\nawake\nnot\n.\n,\n!\n\"\n'\nhello\nworld\n\xe4\xb8\xad\n\xe6\x96\x87\nresume\n");
}

// BERT's BasicTokenizer + WordPiece (Devlin et al.'s tokenization.py, as
// modelzoo's FullTokenizer), written from the algorithm with Python's
// unicodedata. argv: vocab file, do_lower (0|1), text file; prints one
// line of space-joined pieces per text line.
const std::string kPyWordPiece = zoo::testing::oracle("bert_classifier_wordpiece_reference.py");

}  // namespace

// Cased and uncased, zoo's WordPiece gives the pieces of BERT's tokenizer on
// accents (Latin-1 and Latin Extended-A, precomposed or combining),
// punctuation (ASCII symbols and Unicode quotes), CJK characters, control
// characters, tabs and unknown words.
TEST(WordPiece, MatchesBertsTokenizer) {
  if (!have_python()) ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 is not installed";
  TempDir dir;
  const std::string vocab = write_vocab(dir);
  const std::vector<std::string> texts = {
      "The film was unaffable!",
      "Caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9s \xc4\x8c\xc5\xa1 e\xcc\x81",  // Café naïve résumés Čš é
                                                                                    // (combining)
      "\xe2\x80\x9cHello,\xe2\x80\x9d   world\t\x07(ok) $5 a+b",  // “Hello,” world<TAB><BEL>(ok) $5 a+b
      "\xe4\xb8\xad\xe6\x96\x87the man sleeps",                   // 中文the
      "THE MAN IS NOT AWAKE. zzzz unaffs"};
  std::string joined;
  for (const auto& t : texts) joined += (joined.empty() ? "" : "\n") + t;
  const std::string text_file = zoo::testing::write_file(dir / "texts.txt", joined);
  const std::string script = zoo::testing::write_file(dir / "wp.py", kPyWordPiece);
  for (bool lower : {true, false}) {
    auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + vocab + " " + (lower ? "1" : "0") + " " +
                                       text_file);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::istringstream expected(r.output);
    text::WordPieceTokenizer wp(vocab, lower);
    for (const auto& t : texts) {
      std::string want;
      std::getline(expected, want);
      std::string got;
      for (const auto& p : wp.tokenize(t)) got += (got.empty() ? "" : " ") + p;
      EXPECT_EQ(got, want) << (lower ? "uncased: " : "cased: ") << t;
    }
  }
  EXPECT_EQ(text::WordPieceTokenizer(vocab, true).id("[CLS]"), 2);
  EXPECT_THROW(text::WordPieceTokenizer(dir / "missing.txt", true), std::runtime_error);
}

namespace {

void write_mnli(const TempDir& dir) {
  std::filesystem::create_directories(dir / "mnli");
  const std::string header = "index\tsentence1\tsentence2\tgold_label\n";
  zoo::testing::write_file(dir / "mnli/train.tsv", header +
                                                       "0\tthe man sleeps\tthe man is awake\tcontradiction\n"
                                                       "1\tthe man sleeps\tthe man is not awake\tentailment\n");
  zoo::testing::write_file(dir / "mnli/dev_matched.tsv", header +
                                                             "0\tthe film was great great great great great\t"
                                                             "the film\tneutral\n");
  zoo::testing::write_file(dir / "mnli/dev_mismatched.tsv", header + "0\ta man\tthe man sleeps\tentailment\n");
}

}  // namespace

// MNLI pairs are [CLS] a [SEP] b [SEP] with token type 1 on b and its [SEP]
// (modelzoo's processor marks two positions too early); a pair too long
// loses the longer text's last tokens; the dev split is matched then
// mismatched, flagged as such; a label outside MNLI's three is named.
TEST(Glue, MnliPairsAreEncodedAsBertsPaperSays) {
  TempDir dir;
  write_vocab(dir);
  write_mnli(dir);
  const std::string base = "{data_processor: MNLIDataProcessor, data_dir: " + (dir / "mnli") +
                           ", vocab_file: " + (dir / "vocab.txt") + ", do_lower: true, batch_size: 2, shuffle: false, ";
  data::Features train = zoo::testing::open_loader(base + "is_training: true, max_sequence_length: 12}")->next();
  // the man sleeps | the man is awake  ->  [CLS]=2 the=5 man=17 sleeps=18 [SEP]=3 the man is=19 awake=20 [SEP]
  EXPECT_TRUE(
      torch::equal(train.at("input_ids")[0], torch::tensor({2, 5, 17, 18, 3, 5, 17, 19, 20, 3, 0, 0}, torch::kLong)));
  EXPECT_TRUE(
      torch::equal(train.at("token_type_ids")[0], torch::tensor({0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0}, torch::kLong)));
  EXPECT_EQ(train.at("attention_mask")[1].sum().item<int64_t>(), 11);
  EXPECT_TRUE(torch::equal(train.at("labels"), torch::tensor({2, 0}, torch::kLong)));
  EXPECT_EQ(train.count("is_matched"), 0u);
  data::Features dev = zoo::testing::open_loader(base + "is_training: false, max_sequence_length: 8}")->next();
  // 8 + 2 tokens into 5: the first text, the longer, loses 5 -> [CLS] the film was [SEP] the film [SEP]
  EXPECT_TRUE(torch::equal(dev.at("input_ids")[0], torch::tensor({2, 5, 6, 7, 3, 5, 6, 3}, torch::kLong)));
  EXPECT_TRUE(torch::equal(dev.at("is_matched"), torch::tensor({1, 0}, torch::kLong)));
  EXPECT_TRUE(torch::equal(dev.at("is_mismatched"), torch::tensor({0, 1}, torch::kLong)));
  zoo::testing::write_file(dir / "mnli/train.tsv",
                           "index\tsentence1\tsentence2\tgold_label\n0\ta\tb\tmaybe\n1\ta\tb\tneutral\n");
  EXPECT_NE(zoo::testing::open_error(base + "is_training: true, max_sequence_length: 12}")
                .find("train.tsv, row 1: gold_label 'maybe', expected entailment, neutral or contradiction"),
            std::string::npos);
}

// A modelzoo SST-2 config's model (no model.name: its keys pick
// bert/classifier), shrunk, trains on SST-2 TSV files: the loss falls and
// eval reports accuracy; on MNLI it also reports matched / mismatched accuracy.
TEST(BertClassifier, TrainsOnGlueAndReportsAccuracy) {
  TempDir dir;
  write_vocab(dir);
  write_mnli(dir);
  std::filesystem::create_directories(dir / "sst2");
  std::string train = "sentence\tlabel\n", dev = "sentence\tlabel\n";
  for (int i = 0; i < 8; ++i) {
    train += std::string(i % 2 ? "the film was great !" : "the film was bad .") + "\t" + std::to_string(i % 2) + "\n";
    dev += std::string(i % 2 ? "the film was great !" : "the film was bad .") + "\t" + std::to_string(i % 2) + "\n";
  }
  zoo::testing::write_file(dir / "sst2/train.tsv", train);
  zoo::testing::write_file(dir / "sst2/dev.tsv", dev);
  auto params = [&](const std::string& processor, const std::string& data, int64_t labels) {
    const std::string input = "  data_processor: " + processor + "\n  data_dir: " + (dir / data) +
                              "\n  vocab_file: " + (dir / "vocab.txt") +
                              "\n  max_sequence_length: 16\n  batch_size: 2\n  do_lower: true\n  shuffle: false\n";
    return zoo::testing::write_file(dir / (data + ".yaml"), "train_input:\n" + input +
                                                                "  is_training: true\n"
                                                                "eval_input:\n" +
                                                                input + "  is_training: false\n" + R"(model:
  vocab_size: 32
  hidden_size: 32
  num_hidden_layers: 2
  num_heads: 4
  filter_size: 64
  max_position_embeddings: 16
  encoder_nonlinearity: gelu
  pooler_nonlinearity: tanh
  dropout_rate: 0.0
  attention_dropout_rate: 0.0
  task_dropout: 0.0
  problem_type: single_label_classification
  compute_eval_metrics: true
  num_labels: )" + std::to_string(labels) + R"(
optimizer:
  optimizer_type: AdamW
  learning_rate: 0.001
runconfig:
  seed: 1
  max_steps: 40
  log_steps: 1
  eval_steps: 1
  eval_frequency: 40
  checkpoint_steps: 40
)");
  };
  auto r =
      zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params("SST2DataProcessor", "sst2", 2) +
                                " --mode train_and_eval --model_dir " + (dir / "m"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("so zoo builds bert/classifier"), std::string::npos) << r.output;
  const std::vector<double> losses = zoo::testing::train_losses(r.output);
  ASSERT_EQ(losses.size(), 40u) << r.output;
  EXPECT_LT(losses.back(), 0.25 * losses.front()) << losses.front() << " -> " << losses.back();
  EXPECT_NE(r.output.find("eval/accuracy = 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("eval/f1_score = 1"), std::string::npos) << "two labels: modelzoo's F1 too\n" << r.output;
  auto m =
      zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params("MNLIDataProcessor", "mnli", 3) +
                                " --mode train_and_eval --model_dir " + (dir / "m2"));
  ASSERT_EQ(m.exit_code, 0) << m.output;
  for (const char* metric : {"eval/accuracy = ", "eval/accuracy_matched = ", "eval/accuracy_mismatched = "})
    EXPECT_NE(m.output.find(metric), std::string::npos) << metric << "\n" << m.output;
  EXPECT_EQ(m.output.find("f1_score"), std::string::npos) << "three labels: no F1, as in modelzoo\n" << m.output;
  // A dev set with no mismatched pair measures no mismatched accuracy: said
  // so, and an empty cell in results.csv, not an accuracy of 0.
  const std::string header = "index\tsentence1\tsentence2\tgold_label\n";
  zoo::testing::write_file(dir / "mnli/dev_matched.tsv", header +
                                                             "0\tthe film\tthe film was great\tneutral\n"
                                                             "1\ta man\tthe man sleeps\tentailment\n");
  zoo::testing::write_file(dir / "mnli/dev_mismatched.tsv", header);
  auto matched = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + (dir / "mnli.yaml") +
                                           " --mode eval --model_dir " + (dir / "m2"));
  ASSERT_EQ(matched.exit_code, 0) << matched.output;
  EXPECT_NE(matched.output.find("eval/accuracy_matched = "), std::string::npos) << matched.output;
  EXPECT_EQ(matched.output.find("eval/accuracy_mismatched = "), std::string::npos) << matched.output;
  EXPECT_NE(matched.output.find("eval/accuracy_mismatched not measured: no evaluated sample counts towards it"),
            std::string::npos)
      << matched.output;
  const std::string csv = zoo::testing::read_file(dir / "m2/eval/results.csv");
  auto cells = [](const std::string& line) {
    std::vector<std::string> out(1);
    for (char c : line) {
      if (c == ',') out.emplace_back();
      else out.back().push_back(c);
    }
    return out;
  };
  const std::vector<std::string> columns = cells(csv.substr(0, csv.find('\n')));
  const std::vector<std::string> row = cells(csv.substr(csv.rfind('\n', csv.size() - 2) + 1, std::string::npos));
  const auto column = std::find(columns.begin(), columns.end(), "eval/accuracy_mismatched") - columns.begin();
  ASSERT_LT(static_cast<size_t>(column), columns.size()) << csv;
  ASSERT_EQ(row.size(), columns.size()) << csv;
  EXPECT_TRUE(row[static_cast<size_t>(column)].empty() || row[static_cast<size_t>(column)] == "\n") << csv;
}

// modelzoo's FBetaScoreMetric as the classifier configures it for two
// labels (micro average, no ignored class), from its confusion matrix over
// the labels in [0, 2): precision and recall are both the diagonal over the
// counted rows, so F1 is their accuracy; a label outside is not counted.
TEST(BertClassifier, TwoLabelF1IsModelzoosMicroAveragedScore) {
  using models::MetricTerm, models::ModelOutput, models::add_classification_metrics;
  const torch::Tensor logits = torch::tensor({{2.0, 1.0}, {0.0, 3.0}, {1.0, 0.5}, {0.2, 0.1}, {0.0, 1.0}, {3.0, 0.0}});
  const torch::Tensor labels = torch::tensor({0, 1, 1, 1, -100, 0});
  ModelOutput out;
  add_classification_metrics(out, logits, labels, 2);
  double confusion[2][2] = {};
  const torch::Tensor predicted = logits.argmax(-1);
  for (int64_t i = 0; i < labels.size(0); ++i) {
    const int64_t l = labels[i].item<int64_t>();
    if (l >= 0 && l < 2) confusion[l][predicted[i].item<int64_t>()] += 1;
  }
  const double tp = confusion[0][0] + confusion[1][1];
  const double predicted_total = confusion[0][0] + confusion[1][0] + confusion[0][1] + confusion[1][1];
  const double precision = tp / predicted_total, recall = tp / predicted_total;  // every counted row has both
  const double f1 = 2 * precision * recall / (precision + recall);
  const MetricTerm& term = out.metrics.at("f1_score");
  EXPECT_DOUBLE_EQ(term.sum.item<double>() / term.count.item<double>(), f1);
  EXPECT_DOUBLE_EQ(f1, 3.0 / 5.0);
  const MetricTerm& accuracy = out.metrics.at("accuracy");
  EXPECT_DOUBLE_EQ(accuracy.sum.item<double>() / accuracy.count.item<double>(), 3.0 / 6.0)
      << "accuracy counts every row";
  ModelOutput three;
  add_classification_metrics(three, torch::cat({logits, torch::zeros({6, 1})}, 1), labels.clamp_min(0), 3);
  EXPECT_EQ(three.metrics.count("f1_score"), 0u);
}

// modelzoo's SST-2 config builds Hugging Face's BertForSequenceClassification
// (bert-base-uncased, 2 labels: 109,483,778 parameters).
TEST(BertClassifier, RealConfigHasItsPublishedSize) {
  Params p = load_params(zoo::testing::modelzoo_configs_dir() +
                             "/transformers_pytorch_bert_fine_tuning_classifier_bert_base_classifier_sst2.yaml",
                         YAML::Node());
  EXPECT_EQ(p.model_name, "bert/classifier");
  EXPECT_EQ(summarize_model(p).parameters, 109483778);
}

// The token classifier's F1 terms: with every prediction class 1, class 1
// (B-X) has F1 2 TP / (2 TP + FP) and class 2 (I-X) 0; O is not scored;
// padding is not counted.
TEST(BertTokenClassifier, F1TermsCountTheBAndIClasses) {
  TempDir dir;
  const std::string labels = zoo::testing::write_file(dir / "label2id.json", R"({"O": 0, "B-X": 1, "I-X": 2})");
  YAML::Node y = YAML::Load(
      "{vocab_size: 32, hidden_size: 16, num_hidden_layers: 1, num_heads: 2, filter_size: 32, "
      "max_position_embeddings: 8, num_classes: 3, encoder_output_dropout_rate: 0.0, "
      "compute_eval_metrics: true, label_vocab_file: " +
      labels + "}");
  auto spec = models::find_model("bert/token_classifier").parse(y, config::Context{"m.yaml", "model"});
  auto model = std::dynamic_pointer_cast<models::BertTokenClassifierModel>(spec->build(torch::TensorOptions()));
  ASSERT_TRUE(model);
  {
    torch::NoGradGuard no_grad;
    model->classifier->weight.zero_();
    model->classifier->bias.copy_(torch::tensor({0.0, 5.0, 0.0}));
  }
  model->eval();
  models::Features f;
  f["input_ids"] = torch::randint(1, 32, {1, 6}, torch::kLong);
  f["attention_mask"] = torch::tensor({{1, 1, 1, 1, 1, 0}}, torch::kLong);
  f["labels"] = torch::tensor({{1, 2, 0, 1, 0, 1}}, torch::kLong);  // the last is padding
  f["loss_mask"] = f["attention_mask"];
  const auto out = model->forward(f, true);
  const models::MetricTerm& f1 = out.metrics.at("f1_score");
  EXPECT_EQ(f1.reduce, models::MetricTerm::Reduce::macro_mean);
  // class 1: TP 2, FP 3 (O, I, O), FN 0 -> 4 / 7; class 2: TP 0, FN 1 -> 0 / 1; class 0 not scored: 0 / 0
  EXPECT_TRUE(torch::equal(f1.sum, torch::tensor({0.0, 4.0, 0.0}, torch::kDouble)));
  EXPECT_TRUE(torch::equal(f1.count, torch::tensor({0.0, 7.0, 1.0}, torch::kDouble)));
}

// modelzoo's NER config shape (no model.name: num_classes and
// encoder_output_dropout_rate pick bert/token_classifier; an input section
// without label_vocab_file takes the model's) trains on its CSV data: the
// loss falls and eval reports f1_score 1.
TEST(BertTokenClassifier, TrainsOnNerCsvAndReportsF1) {
  TempDir dir;
  write_vocab(dir);
  std::filesystem::create_directories(dir / "ner");
  zoo::testing::write_file(dir / "ner/label2id.json", R"({"O": 0, "B-X": 1, "I-X": 2})");
  std::string csv = "tokens,labels\n";
  for (int i = 0; i < 8; ++i) csv += i % 2 ? "the man sleeps,O B-X I-X\n" : "a film was great,O O O B-X\n";
  zoo::testing::write_file(dir / "ner/part.csv", csv);
  zoo::testing::write_file(dir / "ner/meta.dat", "part.csv 8\n");
  const std::string input = "  data_processor: BertTokenClassifierDataProcessor\n  data_dir: " + (dir / "ner") +
                            "\n  vocab_file: " + (dir / "vocab.txt") +
                            "\n  label_vocab_file: " + (dir / "ner/label2id.json") +
                            "\n  max_sequence_length: 8\n  batch_size: 4\n"
                            "  do_lower: true\n  shuffle: false\n";
  // eval_input names no label_vocab_file: modelzoo's NER data takes the model's.
  std::string eval_input = input;
  eval_input.erase(
      eval_input.find("  label_vocab_file:"),
      eval_input.find("\n", eval_input.find("  label_vocab_file:")) + 1 - eval_input.find("  label_vocab_file:"));
  const std::string params = zoo::testing::write_file(dir / "ner.yaml", "train_input:\n" + input + "eval_input:\n" +
                                                                            eval_input + R"(model:
  vocab_size: 32
  hidden_size: 32
  num_hidden_layers: 2
  num_heads: 4
  filter_size: 64
  max_position_embeddings: 8
  encoder_nonlinearity: gelu
  encoder_output_dropout_rate: 0.0
  include_padding_in_loss: false
  compute_eval_metrics: true
  num_classes: 3
  label_vocab_file: )" + (dir / "ner/label2id.json") + R"(
optimizer:
  optimizer_type: AdamW
  learning_rate: 0.002
runconfig:
  seed: 1
  max_steps: 40
  log_steps: 1
  eval_steps: 2
  eval_frequency: 40
  checkpoint_steps: 40
)");
  auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params +
                                     " --mode train_and_eval --model_dir " + (dir / "m"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("so zoo builds bert/token_classifier"), std::string::npos) << r.output;
  const std::vector<double> losses = zoo::testing::train_losses(r.output);
  ASSERT_EQ(losses.size(), 40u) << r.output;
  EXPECT_LT(losses.back(), 0.1 * losses.front()) << losses.front() << " -> " << losses.back();
  EXPECT_NE(r.output.find("eval/f1_score = 1"), std::string::npos) << r.output;
}

// modelzoo's BC5CDR-chem NER config: BERT-base without the pooler plus a 7-class layer.
TEST(BertTokenClassifier, RealConfigHasItsSize) {
  Params p = load_params(zoo::testing::modelzoo_configs_dir() +
                             "/transformers_pytorch_bert_fine_tuning_token_classifier_bert_base_ner_bc5cdr_chem.yaml",
                         YAML::Node());
  EXPECT_EQ(p.model_name, "bert/token_classifier");
  EXPECT_EQ(summarize_model(p).parameters, 109482240 - (768 * 768 + 768) + 7 * 768 + 7);
}
