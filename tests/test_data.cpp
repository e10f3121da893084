// Data: the built-in corpus, the byte-level text processor, the resumable
// map-style loader, HDF5 samples as modelzoo writes them, and bad-data errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data/corpus.h"
#include "data/processors/byte_text.h"
#include "data/processors/gpt_hdf5.h"
#include "data/processors/mnist.h"
#include "data/registry.h"
#include "data_fixtures.h"
#include "models/registry.h"
#include "runner/params/params.h"
#include "test_util.h"

using namespace zoo;
using namespace zoo::data;
using zoo::testing::TempDir;

namespace {
std::unique_ptr<DataLoader> open(const std::string& yaml) { return zoo::testing::open_loader(yaml); }
std::string error_of(const std::string& yaml) { return zoo::testing::open_error(yaml); }
}  // namespace

TEST(Data, CorpusIsDeterministicAndStructured) {
  std::string a = generate_corpus(1, 5000), b = generate_corpus(1, 5000), c = generate_corpus(2, 5000);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_GE(a.size(), 5000u);
  EXPECT_NE(a.find(" walks to "), std::string::npos);
  EXPECT_NE(a.find(" counts:"), std::string::npos);
  TempDir dir;
  EXPECT_TRUE(write_corpus(dir.path(), 3000, 1000));
  EXPECT_FALSE(write_corpus(dir.path(), 3000, 1000));  // never overwrites
  EXPECT_EQ(zoo::testing::read_file(dir / "train/corpus.txt"), generate_corpus(1, 3000));
}

TEST(Data, ByteTextSamplesAreShiftedWindows) {
  TempDir dir;
  zoo::testing::write_file(dir / "a.txt", "abcdefghij");
  zoo::testing::write_file(dir / "b.txt", "klmnop");
  ByteTextSource s({dir / "a.txt", dir / "b.txt"}, 4, "test");
  EXPECT_EQ(s.num_samples(), 3);  // 16 bytes -> (16 - 1) / 4
  int32_t ids[4], mask[4], labels[4];
  s.read(1, ids, mask, labels);
  EXPECT_EQ(std::string(ids, ids + 4), "efgh");
  EXPECT_EQ(std::string(labels, labels + 4), "fghi");
  EXPECT_EQ(mask[0] + mask[1] + mask[2] + mask[3], 4);
}

TEST(Data, ShuffledLoaderIsAPermutationPerEpochAndResumesExactly) {
  TempDir dir;
  write_corpus(dir.path(), 4000, 100);
  std::string yaml = "{data_processor: ByteTextDataProcessor, data_dir: " + (dir / "train") +
                     ", batch_size: 4, max_sequence_length: 16, shuffle: true, shuffle_seed: 5}";
  auto loader = open(yaml);
  const int64_t per_epoch = loader->batches_per_epoch();
  ASSERT_GT(per_epoch, 10);
  // One shuffled epoch holds the same samples as an unshuffled one, in another order.
  auto plain = open("{data_processor: ByteTextDataProcessor, data_dir: " + (dir / "train") +
                    ", batch_size: 4, max_sequence_length: 16}");
  auto rows = [](const Features& b, std::vector<std::string>& out) {
    for (int64_t r = 0; r < b.at("input_ids").size(0); ++r) {
      torch::Tensor row = b.at("input_ids")[r].to(torch::kChar).contiguous();
      EXPECT_TRUE(torch::equal(b.at("input_ids")[r].narrow(0, 1, 15), b.at("labels")[r].narrow(0, 0, 15)));
      out.emplace_back(reinterpret_cast<const char*>(row.data_ptr()), 16);
    }
  };
  std::vector<std::string> shuffled, ordered;
  std::vector<torch::Tensor> first_run;
  for (int64_t i = 0; i < per_epoch; ++i) {
    Features b = loader->next();
    first_run.push_back(b.at("input_ids"));
    rows(b, shuffled);
    rows(plain->next(), ordered);
  }
  EXPECT_NE(shuffled, ordered);
  // (4000 bytes / 16 = 249 samples; the 1 left over in each epoch differs.)
  std::sort(shuffled.begin(), shuffled.end());
  std::sort(ordered.begin(), ordered.end());
  std::vector<std::string> common;
  std::set_intersection(shuffled.begin(), shuffled.end(), ordered.begin(), ordered.end(), std::back_inserter(common));
  EXPECT_GE(common.size() + 4, ordered.size());
  // A new loader seeked to batch 7 yields the same batches as the first from there on.
  auto resumed = open(yaml);
  resumed->seek(7 * 4);
  for (int64_t i = 7; i < per_epoch; ++i) EXPECT_TRUE(torch::equal(resumed->next().at("input_ids"), first_run[i]));
  // The next epoch has a different order.
  EXPECT_FALSE(torch::equal(loader->next().at("input_ids"), first_run[0]));
}

TEST(Data, BadDataErrorsNameKeyAndPlace) {
  TempDir dir;
  EXPECT_NE(error_of("{data_processor: ByteTextDataProcessor, data_dir: /no/such/dir, batch_size: 2}")
                .find("train_input.data_dir: directory '/no/such/dir' does not exist"),
            std::string::npos);
  std::filesystem::create_directories(dir / "empty");
  EXPECT_NE(error_of("{data_processor: ByteTextDataProcessor, data_dir: " + (dir / "empty") + ", batch_size: 2}")
                .find("no *.txt files in " + (dir / "empty")),
            std::string::npos);
  zoo::testing::write_file(dir / "small/a.txt", "tiny");
  EXPECT_NE(error_of("{data_processor: ByteTextDataProcessor, data_dir: " + (dir / "small") + ", batch_size: 2}")
                .find("fewer than batch_size 2"),
            std::string::npos);
  EXPECT_NE(error_of("{data_processor: ByteTextDataProcessor, data_dir: " + (dir / "small") + "}")
                .find("train_input.batch_size: required"),
            std::string::npos);
  EXPECT_NE(error_of("{data_processor: GptHDF5DataProcessor, data_dir: " + (dir / "small") + ", batch_size: 2}")
                .find("no *.h5 files"),
            std::string::npos);
  // Each HDF5 processor names the file and key once, however deep the error arose.
  for (const char* processor :
       {"GptHDF5DataProcessor", "DpoHDF5DataProcessor", "DPRHDF5DataProcessor", "BertHDF5DataProcessor"}) {
    const std::string e =
        error_of(std::string("{data_processor: ") + processor + ", data_dir: " + (dir / "small") + ", batch_size: 2}");
    const size_t first = e.find("train_input.data_dir: ");
    EXPECT_NE(first, std::string::npos) << processor << ": " << e;
    EXPECT_EQ(e.find("train_input.data_dir: ", first + 1), std::string::npos) << processor << ": " << e;
  }
}

// HDF5 files written with h5py exactly as modelzoo's preprocessing writes them.
TEST(Data, ReadsModelzooHdf5Samples) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  std::string script = zoo::testing::write_file(dir / "w.py", zoo::testing::oracle("data_write_hdf5.py"));
  ASSERT_EQ(zoo::testing::run_command("/usr/bin/python3 " + script + " " + dir.path()).exit_code, 0);
  auto loader = open("{data_processor: GptHDF5MapDataProcessor, data_dir: " + dir.path() + ", batch_size: 4}");
  EXPECT_EQ(loader->batches_per_epoch(), 2);
  Features b = loader->next();
  EXPECT_EQ(b.at("input_ids")[0][0].item<int64_t>(), 0);
  EXPECT_EQ(b.at("labels")[3][7].item<int64_t>(), 30 + 8);
  EXPECT_EQ(b.at("attention_mask")[0].sum().item<int64_t>(), 6);
  b = loader->next();
  EXPECT_EQ(b.at("input_ids")[1][0].item<int64_t>(), 100);  // 6th sample: first of the second file
  EXPECT_NE(error_of("{data_processor: GptHDF5DataProcessor, data_dir: " + dir.path() +
                     ", batch_size: 2, max_sequence_length: 16}")
                .find("sequence length 8 differs from max_sequence_length 16"),
            std::string::npos)
      << error_of("{data_processor: GptHDF5DataProcessor, data_dir: " + dir.path() +
                  ", batch_size: 2, max_sequence_length: 16}");
  std::filesystem::create_directories(dir / "bad");
  std::filesystem::rename(dir / "bad_rank.h5x", dir / "bad/x.h5");
  EXPECT_NE(error_of("{data_processor: GptHDF5DataProcessor, data_dir: " + (dir / "bad") + ", batch_size: 2}")
                .find((dir / "bad/x.h5") + ": dataset 'data' has shape (2, 10)"),
            std::string::npos);
  // Corpus format: 26 tokens cut into windows of 8 + 1 advancing by 8 -> 3 samples.
  const std::string corpus =
      "{data_processor: GptHDF5MapDataProcessor, data_dir: " + (dir / "corpus") + ", batch_size: 3";
  EXPECT_NE(error_of(corpus + "}").find("needs max_sequence_length"), std::string::npos) << error_of(corpus + "}");
  auto stream = open(corpus + ", max_sequence_length: 8}");
  EXPECT_EQ(stream->batches_per_epoch(), 1);
  Features w = stream->next();
  EXPECT_EQ(w.at("input_ids")[1][0].item<int64_t>(), 1008);
  EXPECT_EQ(w.at("labels")[1][7].item<int64_t>(), 1016);
  EXPECT_EQ(w.at("labels")[2][7].item<int64_t>(), 1024);
  EXPECT_EQ(w.at("attention_mask").sum().item<int64_t>(), 24);
  // Token ids the model has no embedding for: the error names the file and sample.
  auto checked = open("{data_processor: GptHDF5MapDataProcessor, data_dir: " + dir.path() + ", batch_size: 4}");
  checked->check_token_ids(100);  // the first file's ids are below 100, the second's are not
  checked->next();
  try {
    checked->next();
    ADD_FAILURE() << "no error for token id 100 with vocab_size 100";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(
        std::string(e.what()).find((dir / "examples_1.h5") + ", sample 0: token id 100 in input_ids at position 0 "
                                                             "is outside the model's vocabulary (vocab_size 100)"),
        std::string::npos)
        << e.what();
  }
  auto checked_stream = open(corpus + ", max_sequence_length: 8}");
  checked_stream->check_token_ids(1016);
  try {
    checked_stream->next();
    ADD_FAILURE() << "no error for label 1016 with vocab_size 1016";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(
        std::string(e.what()).find((dir / "corpus/tokens_0.h5") + ", window 1: token id 1016 in labels at position 7"),
        std::string::npos)
        << e.what();
  }
}

TEST(Data, SyntheticSamplesAreDeterministicShiftedAndInVocabulary) {
  const std::string yaml =
      "{data_processor: SyntheticDataProcessor, vocab_size: 50, max_sequence_length: 16, "
      "num_examples: 40, batch_size: 8, seed: ";
  auto a = open(yaml + "3}"), b = open(yaml + "3}"), other_seed = open(yaml + "4}");
  EXPECT_EQ(a->batches_per_epoch(), 5);
  Features x = a->next(), y = b->next();
  EXPECT_TRUE(torch::equal(x.at("input_ids"), y.at("input_ids")));
  EXPECT_FALSE(torch::equal(x.at("input_ids"), other_seed->next().at("input_ids")));
  EXPECT_TRUE(torch::equal(x.at("input_ids").narrow(1, 1, 15), x.at("labels").narrow(1, 0, 15)));
  EXPECT_GE(x.at("input_ids").min().item<int64_t>(), 0);
  EXPECT_LT(x.at("labels").max().item<int64_t>(), 50);
  EXPECT_GT(std::get<0>(at::_unique(x.at("input_ids"))).numel(), 40);  // spread over the vocabulary
  EXPECT_EQ(x.at("attention_mask").sum().item<int64_t>(), 8 * 16);
  EXPECT_NE(error_of("{data_processor: SyntheticDataProcessor, max_sequence_length: 16, batch_size: 8}")
                .find("train_input.vocab_size: required"),
            std::string::npos);
}

using zoo::testing::write_idx;

TEST(Data, MnistIdxFilesRawOrGzippedBecomeNormalizedImagesAndLabels) {
  TempDir dir;
  const std::string raw = dir / "MNIST/raw";
  auto images = [](int n, int offset) {
    std::vector<uint8_t> v(static_cast<size_t>(n) * 28 * 28);
    for (size_t p = 0; p < v.size(); ++p) v[p] = static_cast<uint8_t>((p * 7 + offset) % 256);
    return v;
  };
  std::vector<uint8_t> labels(10);
  for (int i = 0; i < 10; ++i) labels[i] = static_cast<uint8_t>((i * 3) % 10);
  write_idx(raw + "/train-images-idx3-ubyte", {10, 28, 28}, images(10, 0));
  write_idx(raw + "/train-labels-idx1-ubyte", {10}, labels);
  ASSERT_EQ(zoo::testing::run_command("gzip " + raw + "/train-labels-idx1-ubyte").exit_code, 0);  // torchvision's .gz
  write_idx(raw + "/t10k-images-idx3-ubyte", {6, 28, 28}, images(6, 1));
  write_idx(raw + "/t10k-labels-idx1-ubyte", {6}, std::vector<uint8_t>(6, 7));

  const std::string section = "{data_processor: MNISTDataProcessor, data_dir: " + dir.path() + ", batch_size: 4";
  auto train = open(section + ", drop_last_batch: true, to_float16: true}");
  EXPECT_EQ(train->batches_per_epoch(), 2);
  Features b = train->next();
  ASSERT_EQ(b.at("input").sizes(), (std::vector<int64_t>{4, 1, 28, 28}));
  const torch::Tensor want =
      ((torch::arange(4 * 784, torch::kLong).mul(7).remainder(256)).to(torch::kFloat) / 255.0 - 0.1307) / 0.3081;
  EXPECT_TRUE(torch::allclose(b.at("input").flatten(), want, 1e-6, 1e-6));
  EXPECT_TRUE(torch::equal(b.at("labels"), torch::tensor({0, 3, 6, 9}, torch::kLong)));

  // eval_input reads the test split.
  YAML::Node n = YAML::Load(section + "}");
  config::Context eval_ctx{"in.yaml", "eval_input", nullptr};
  auto eval = open_input(n, eval_ctx);
  EXPECT_TRUE(torch::equal(eval->next().at("labels"), torch::full({4}, 7, torch::kLong)));

  // Bad files name the file and the problem.
  write_idx(dir / "short/train-images-idx3-ubyte", {10, 28, 28}, images(3, 0));
  write_idx(dir / "short/train-labels-idx1-ubyte", {10}, labels);
  EXPECT_NE(error_of("{data_processor: MNISTDataProcessor, batch_size: 2, data_dir: " + (dir / "short") + "}")
                .find((dir / "short/train-images-idx3-ubyte") + ": truncated"),
            std::string::npos);
  write_idx(dir / "count/train-images-idx3-ubyte", {10, 28, 28}, images(10, 0));
  write_idx(dir / "count/train-labels-idx1-ubyte", {9}, std::vector<uint8_t>(9, 1));
  EXPECT_NE(error_of("{data_processor: MNISTDataProcessor, batch_size: 2, data_dir: " + (dir / "count") + "}")
                .find("holds 10 images but " + (dir / "count/train-labels-idx1-ubyte") + " holds 9 labels"),
            std::string::npos);
  zoo::testing::write_file(dir / "magic/train-images-idx3-ubyte", "not idx at all");
  write_idx(dir / "magic/train-labels-idx1-ubyte", {10}, labels);
  EXPECT_NE(error_of("{data_processor: MNISTDataProcessor, batch_size: 2, data_dir: " + (dir / "magic") + "}")
                .find((dir / "magic/train-images-idx3-ubyte") + ": not an IDX file"),
            std::string::npos);
  std::filesystem::create_directories(dir / "none");
  EXPECT_NE(error_of("{data_processor: MNISTDataProcessor, batch_size: 2, data_dir: " + (dir / "none") + "}")
                .find("expected train-images-idx3-ubyte and train-labels-idx1-ubyte"),
            std::string::npos);
}

// modelzoo's FC-MNIST config as it ships (input sections naming no
// data_processor, drop_last_batch, to_float16), with AdamW and fewer steps,
// trains on MNIST IDX files whose digit is drawn as a bright row: the loss
// falls, eval reads the test split and reports accuracy, and the weights
// carry modelzoo's names.
TEST(FcMnist, ModelzooConfigTrainsOnMnistFiles) {
  TempDir dir;
  auto digits = [](int n, std::vector<uint8_t>& labels) {
    std::vector<uint8_t> v(static_cast<size_t>(n) * 784, 0);
    labels.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      labels[i] = static_cast<uint8_t>(i % 10);
      for (int x = 0; x < 28; ++x)
        v[static_cast<size_t>(i) * 784 + static_cast<size_t>(2 * labels[i] + 3) * 28 + x] = 255;
    }
    return v;
  };
  std::vector<uint8_t> train_labels, test_labels;
  write_idx(dir / "mnist/train-images-idx3-ubyte", {80, 28, 28}, digits(80, train_labels));
  write_idx(dir / "mnist/train-labels-idx1-ubyte", {80}, train_labels);
  write_idx(dir / "mnist/t10k-images-idx3-ubyte", {20, 28, 28}, digits(20, test_labels));
  write_idx(dir / "mnist/t10k-labels-idx1-ubyte", {20}, test_labels);
  const std::string input = "    data_dir: " + (dir / "mnist") + "\n    batch_size: 10\n    drop_last_batch: True\n";
  const std::string params = zoo::testing::write_file(
      dir / "p.yaml", "train_input:\n" + input + "    to_float16: True\n    shuffle: True\neval_input:\n" + input +
                          "    shuffle: False\n" + R"(model:
    name: "fc_mnist"
    mixed_precision: False
    depth: 2
    hidden_size: 32
    dropout: 0.0
    activation_fn: "relu"
    to_float16: False
    compute_eval_metrics: True
optimizer:
    optimizer_type: "AdamW"
    learning_rate: 0.01
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
  const std::vector<double> losses = zoo::testing::train_losses(r.output);
  ASSERT_EQ(losses.size(), 40u) << r.output;
  EXPECT_LT(losses.back(), 0.2 * losses.front()) << losses.front() << " -> " << losses.back();
  EXPECT_NE(r.output.find("eval/accuracy = 1"), std::string::npos) << r.output;
  Params p = load_params(params, YAML::Node());
  auto model = p.model->build(torch::TensorOptions());
  std::set<std::string> names;
  for (const auto& kv : model->named_parameters()) names.insert(kv.key());
  EXPECT_EQ(names, (std::set<std::string>{"fc_layers.0.weight", "fc_layers.0.bias", "fc_layers.1.weight",
                                          "fc_layers.1.bias", "last_layer.weight", "last_layer.bias"}));
}
