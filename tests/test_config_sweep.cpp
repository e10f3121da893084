// Every real config zoo has (modelzoo's files in tests/modelzoo_configs, both formats, and
// configs/ in this repository) trains and evaluates as written: widths,
// depths, steps, batch sizes and data paths shrunk, every other key (the
// data processor, precision, optimizer, schedule, flags) kept, on small data
// made in the config's own processor format; then `train_and_eval` and
// `eval_all`, as a user would run them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>
#include <set>

#include "configs/schema/yaml_util.h"
#include "data_fixtures.h"
#include "models/registry.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/params/params.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// The config files, as paths relative to the source directory.
std::vector<std::string> sweep_configs() {
  std::vector<std::string> files;
  const fs::path source = zoo::testing::source_dir();
  auto add = [&](const fs::path& dir, bool recurse) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return;
    auto take = [&](const fs::directory_entry& e) {
      if (e.is_regular_file() && e.path().extension() == ".yaml" &&
          e.path().filename().string().rfind("runconfig_schema", 0) != 0)  // modelzoo's schema, not a params file
        files.push_back(fs::relative(e.path(), source).string());
    };
    if (recurse)
      for (const auto& e : fs::recursive_directory_iterator(dir)) take(e);
    else
      for (const auto& e : fs::directory_iterator(dir)) take(e);
  };
  add(source / "tests/modelzoo_configs", false);
  add(source / "tests/modelzoo_configs/trainer_format", false);
  add(source / "configs/cerebras_gpt", true);
  add(source / "configs/layers_api_demo", true);
  add(source / "configs/finetune", true);
  add(source / "configs/gpt_neox", true);
  add(source / "configs/llama2", true);
  files.push_back("configs/quickstart.yaml");
  std::sort(files.begin(), files.end());
  return files;
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (const char* prefix : {"tests/modelzoo_configs/", "configs/"})
    if (name.rfind(prefix, 0) == 0) name = name.substr(std::string(prefix).size());
  name = name.substr(0, name.size() - 5);  // .yaml
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

// The shapes the made data has, for the model section.
struct DataShape {
  int64_t vocab = 0;  // 0: the data decides no vocabulary
  int64_t positions = 32;
};

void set_if_given(YAML::Node node, const std::string& key, const YAML::Node& value) {
  if (static_cast<const YAML::Node&>(node)[key]) node[key] = value;
}

// A WordPiece vocabulary of `size` lines: BERT's specials, then words w5, w6, ...
std::string write_wordpiece_vocab(const std::string& path, int size) {
  std::string v = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  for (int i = 5; i < size; ++i) v += "w" + std::to_string(i) + "\n";
  return zoo::testing::write_file(path, v);
}

std::string words(int first, int count, int vocab) {
  std::string s;
  for (int k = 0; k < count; ++k)
    s += (k ? " " : "") + std::string("w") + std::to_string(5 + (first + k) % (vocab - 5));
  return s;
}

// `csv` as dir/part.csv, listed with its `rows` in dir/meta.dat, as modelzoo's CSV processors read them.
std::string write_csv_data(const std::string& dir, const std::string& csv, int rows) {
  zoo::testing::write_file(dir + "/part.csv", csv);
  zoo::testing::write_file(dir + "/meta.dat", "part.csv " + std::to_string(rows) + "\n");
  return dir;
}

std::string python_list(const std::vector<std::string>& items, bool quoted) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + (quoted ? "'" + items[i] + "'" : items[i]);
  return s + "]";
}

// ByteTokenizer HDF5 samples of 16 tokens, written by `zoo data create-hdf5` as a user would: LMData's
// in train/ and eval/, packed Summarization rows in packed_train/ and packed_eval/.
const std::string& gpt_hdf5_data() {
  static TempDir dir;
  static const bool made = [] {
    for (const std::string split : {"train", "eval"}) {
      std::string text;
      for (int d = 0; d < 12; ++d) text += "Document " + std::to_string(d) + " says the zoo trains small models. ";
      zoo::testing::write_file(dir / ("text_" + split + "/doc.txt"), text);
      const auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " data create-hdf5 LMData --input_dir " +
                                               (dir / ("text_" + split)) + " --output_dir " + (dir / split) +
                                               " --tokenizer_type ByteTokenizer --eos_id 0 --max_seq_length 16");
      EXPECT_EQ(r.exit_code, 0) << r.output;
      // Prompt/completion pairs packed several to a row, for sections with use_vsl (the shipped fine-tuning recipe).
      std::string pairs;
      for (int d = 0; d < 16; ++d)
        pairs += "{\"prompt\": \"Doc " + std::to_string(d) + "?\", \"completion\": \" ok\"}\n";
      zoo::testing::write_file(dir / ("pairs_" + split + "/pairs.jsonl"), pairs);
      const auto packed =
          zoo::testing::run_command(zoo::testing::zoo_binary() + " data create-hdf5 Summarization --input_dir " +
                                    (dir / ("pairs_" + split)) + " --output_dir " + (dir / ("packed_" + split)) +
                                    " --tokenizer_type ByteTokenizer --eos_id 0 --max_seq_length 16 "
                                    "--pack true");
      EXPECT_EQ(packed.exit_code, 0) << packed.output;
    }
    return true;
  }();
  (void)made;
  static const std::string path = dir.path();
  return path;
}

// Writes data for `processor` into `dir` in the format it reads, points
// the section at it and shrinks its sizes. `model` is the (shrunk) model
// section, for what the data must agree with.
void make_data(const std::string& processor, YAML::Node in, YAML::Node model, const std::string& dir, bool eval,
               DataShape& shape) {
  const int kSamples = 16, kVocab = 32;
  set_if_given(in, "batch_size", YAML::Node(2));
  set_if_given(in, "max_sequence_length", YAML::Node(16));
  set_if_given(in, "max_predictions_per_seq", YAML::Node(3));
  if (processor == "GptHDF5DataProcessor" || processor == "GptHDF5MapDataProcessor") {
    const bool packed = in["use_vsl"] && in["use_vsl"].as<bool>();
    const std::string data = gpt_hdf5_data() + (packed ? "/packed_" : "/") + (eval ? "eval" : "train");
    if (in["mixture"])
      for (YAML::Node item : in["mixture"]) item["data_dir"] = data;
    else in["data_dir"] = data;
    shape.vocab = 256;  // ByteTokenizer's bytes (byte 0 ends each document)
    shape.positions = 16;
  } else if (processor == "ByteTextDataProcessor") {
    zoo::testing::write_small_corpus(dir);
    in["data_dir"] = dir + (eval ? "/eval" : "/train");
    in["max_sequence_length"] = 16;
    shape.vocab = 256;
    shape.positions = 16;
  } else if (processor == "MNISTDataProcessor") {
    for (const std::string split : {"train", "t10k"}) {
      std::vector<uint8_t> images(kSamples * 28 * 28), labels(kSamples);
      for (size_t p = 0; p < images.size(); ++p) images[p] = static_cast<uint8_t>((p * 7 + p / 784 * 31) % 256);
      for (int i = 0; i < kSamples; ++i) labels[static_cast<size_t>(i)] = static_cast<uint8_t>(i % 10);
      zoo::testing::write_idx(dir + "/MNIST/raw/" + split + "-images-idx3-ubyte", {kSamples, 28, 28}, images);
      zoo::testing::write_idx(dir + "/MNIST/raw/" + split + "-labels-idx1-ubyte", {kSamples}, labels);
    }
    in["data_dir"] = dir;
  } else if (processor == "BertCSVDynamicMaskDataProcessor") {
    // modelzoo's pre-training CSV: `tokens` as Python's str(list); masked-LM-only
    // files (disable_nsp) have that column alone, as its create_csv_mlm_only writes them.
    const bool nsp = !(model["disable_nsp"] && model["disable_nsp"].as<bool>());
    in["vocab_file"] = write_wordpiece_vocab(dir + "/vocab.txt", kVocab);
    std::string csv = nsp ? "tokens,segment_ids,is_random_next\n" : "tokens\n";
    for (int r = 0; r < kSamples; ++r) {
      std::vector<std::string> a, b;
      for (int k = 0; k < 4 + r % 4; ++k) a.push_back("w" + std::to_string(5 + (r + k) % (kVocab - 5)));
      for (int k = 0; k < 3; ++k) b.push_back("w" + std::to_string(5 + (2 * r + k) % (kVocab - 5)));
      std::vector<std::string> tokens = {"[CLS]"};
      tokens.insert(tokens.end(), a.begin(), a.end());
      tokens.push_back("[SEP]");
      if (nsp) {
        tokens.insert(tokens.end(), b.begin(), b.end());
        tokens.push_back("[SEP]");
      }
      csv += "\"" + python_list(tokens, true) + "\"";
      if (nsp) {
        std::vector<std::string> segments(a.size() + 2, "0");
        segments.resize(tokens.size(), "1");
        csv += ",\"" + python_list(segments, false) + "\"," + std::to_string(r % 2);
      }
      csv += "\n";
    }
    in["data_dir"] = write_csv_data(dir + "/csv", csv, kSamples);
    shape.vocab = kVocab;
  } else if (processor == "BertSumCSVDataProcessor") {
    in["vocab_file"] = write_wordpiece_vocab(dir + "/vocab.txt", kVocab);
    set_if_given(in, "max_cls_tokens", YAML::Node(3));
    std::string csv = "input_token_ids,labels,segment_ids,cls_indices\n";
    for (int r = 0; r < kSamples; ++r)  // two sentences: [CLS] w w [SEP] [CLS] w w w [SEP]
      csv += "\"[2, " + std::to_string(5 + r % 20) + ", 6, 3, 2, 7, " + std::to_string(8 + r % 20) + ", 9, 3]\",\"[" +
             std::to_string(r % 2) + ", " + std::to_string(1 - r % 2) +
             "]\",\"[0, 0, 0, 0, 1, 1, 1, 1, 1]\",\"[0, 4]\"\n";
    in["data_dir"] = write_csv_data(dir + "/sum", csv, kSamples);
    shape.vocab = kVocab;
  } else if (processor == "BertTokenClassifierDataProcessor") {
    in["vocab_file"] = write_wordpiece_vocab(dir + "/vocab.txt", kVocab);
    const int classes = model["num_classes"] ? model["num_classes"].as<int>() : 3;
    std::string labels = "{\"O\": 0";
    for (int c = 1; c < classes; ++c) labels += ", \"T" + std::to_string(c) + "\": " + std::to_string(c);
    const std::string label_file = zoo::testing::write_file(dir + "/ner/label2id.json", labels + "}");
    std::string csv = "tokens,labels\n";
    for (int r = 0; r < kSamples; ++r)
      csv += words(r, 4, kVocab) + ",O T" + std::to_string(1 + r % (classes - 1)) + " O O\n";
    in["data_dir"] = write_csv_data(dir + "/ner", csv, kSamples);
    set_if_given(in, "label_vocab_file", YAML::Node(label_file));
    set_if_given(model, "label_vocab_file", YAML::Node(label_file));
    shape.vocab = kVocab;
  } else if (processor == "SST2DataProcessor") {
    in["vocab_file"] = write_wordpiece_vocab(dir + "/vocab.txt", kVocab);
    std::string tsv = "sentence\tlabel\n";
    for (int r = 0; r < kSamples; ++r) tsv += words(r, 3 + r % 3, kVocab) + "\t" + std::to_string(r % 2) + "\n";
    zoo::testing::write_file(dir + "/glue/train.tsv", tsv);
    zoo::testing::write_file(dir + "/glue/dev.tsv", tsv);
    in["data_dir"] = dir + "/glue";
    shape.vocab = kVocab;
  } else if (processor == "T5DynamicDataProcessor" || processor == "TransformerDynamicDataProcessor") {
    // <pad> 0, <unk> 1, <s> 2, </s> 3, then words w4 .. w11.
    std::string vocab = "<pad>\n<unk>\n<s>\n</s>\n";
    for (int i = 4; i < 12; ++i) vocab += "w" + std::to_string(i) + "\n";
    const std::string vocab_file = zoo::testing::write_file(dir + "/vocab.txt", vocab);
    in["src_vocab_file"] = vocab_file;
    set_if_given(in, "tgt_vocab_file", YAML::Node(vocab_file));
    if (processor == "T5DynamicDataProcessor") {
      std::string text;
      for (int d = 0; d < kSamples; ++d) {
        for (int i = 0; i < 24; ++i) text += "w" + std::to_string(4 + (i + d) % 8) + " ";
        text += "\n";
      }
      zoo::testing::write_file(dir + "/text/part0.txt", text);
      zoo::testing::write_file(dir + "/text/meta.dat", "part0.txt " + std::to_string(kSamples) + "\n");
      in["src_max_sequence_length"] = 16;
      in["tgt_max_sequence_length"] = 6;
    } else {
      std::string src, tgt;
      for (int i = 0; i < kSamples; ++i) {
        src += "w" + std::to_string(4 + i % 8) + " w" + std::to_string(4 + (i + 1) % 8) + "\n";
        tgt += "w" + std::to_string(4 + (i + 1) % 8) + " w" + std::to_string(4 + i % 8) + "\n";
      }
      zoo::testing::write_file(dir + "/text/a.en", src);
      zoo::testing::write_file(dir + "/text/a.de", tgt);
      zoo::testing::write_file(dir + "/text/meta.dat", "a.en a.de " + std::to_string(kSamples) + "\n");
      in["src_max_sequence_length"] = 8;
      in["tgt_max_sequence_length"] = 8;
    }
    in["src_data_dir"] = dir + "/text";
    set_if_given(in, "tgt_data_dir", YAML::Node(dir + "/text"));
    shape.vocab = 12;
    shape.positions = 16;
  } else if (processor == "SeverstalBinaryClassDataProcessor") {
    zoo::testing::write_severstal(dir, kSamples, 3);
    in["data_dir"] = dir;
    if (in["image_shape"]) {
      const int64_t channels = in["image_shape"][2].as<int64_t>();
      in["image_shape"] = std::vector<int64_t>{32, 32, channels};
    }
  }  // processors that read no files (AlphabetDataProcessor) keep their sections
}

// Widths and depths cut; every flag kept.
void shrink_model(YAML::Node model, const DataShape& shape) {
  const YAML::Node& given = model;
  std::optional<double> rotary_share;  // of the head, kept as the config has it
  if (given["rotary_dim"] && given["hidden_size"] && given["num_heads"])
    rotary_share =
        given["rotary_dim"].as<double>() / (given["hidden_size"].as<double>() / given["num_heads"].as<double>());
  for (const auto& [key, value] : std::vector<std::pair<std::string, int64_t>>{{"hidden_size", 32},
                                                                               {"d_model", 32},
                                                                               {"d_kv", 8},
                                                                               {"num_heads", 4},
                                                                               {"filter_size", 64},
                                                                               {"d_ff", 64},
                                                                               {"num_hidden_layers", 2},
                                                                               {"encoder_num_hidden_layers", 2},
                                                                               {"decoder_num_hidden_layers", 2},
                                                                               {"depth", 2}})
    set_if_given(model, key, YAML::Node(value));
  if (rotary_share) model["rotary_dim"] = std::max<int64_t>(2, std::lround(*rotary_share * 8 / 2) * 2);
  for (YAML::Node holder : {model, model["extra_attention_params"]})
    if (holder.IsMap() && holder["num_kv_groups"] && holder["num_kv_groups"].as<int64_t>() > 1)
      holder["num_kv_groups"] = 2;
  for (const char* key : {"max_position_embeddings", "src_max_position_embeddings", "tgt_max_position_embeddings"})
    set_if_given(model, key, YAML::Node(shape.positions));
  if (shape.vocab)
    for (const char* key : {"vocab_size", "src_vocab_size", "tgt_vocab_size"})
      set_if_given(model, key, YAML::Node(shape.vocab));
  for (const char* key : {"encoder_filters", "decoder_filters"})
    if (given[key] && given[key].IsSequence()) {
      std::vector<int64_t> filters;
      for (size_t i = 0; i < given[key].size(); ++i) filters.push_back(int64_t{4} << i);
      if (std::string(key) == "decoder_filters") std::reverse(filters.begin(), filters.end());
      model[key] = filters;
    }
}

// A copy that shares no node: merge keys and aliases leave one node in two
// sections (a severstal eval_input merges train_input's), and yaml-cpp's
// assignment writes through to every holder.
YAML::Node unshared(const YAML::Node& n) {
  if (n.IsMap()) {
    YAML::Node m(YAML::NodeType::Map);
    for (const auto& kv : n) m[kv.first.Scalar()] = unshared(kv.second);
    return m;
  }
  if (n.IsSequence()) {
    YAML::Node s(YAML::NodeType::Sequence);
    for (const auto& item : n) s.push_back(unshared(item));
    return s;
  }
  if (n.IsScalar()) return YAML::Node(n.Scalar());
  return YAML::Node();
}

// The data sections of either format.
std::vector<YAML::Node> data_sections(YAML::Node root) {
  std::vector<YAML::Node> out;
  if (!root["trainer"]) {
    for (const char* s : {"train_input", "eval_input"})
      if (root[s]) out.push_back(root[s]);
    return out;
  }
  YAML::Node t = root["trainer"];
  auto add = [&](YAML::Node n) {
    if (n.IsSequence())
      for (YAML::Node item : n) out.push_back(item);
    else if (n.IsMap()) out.push_back(n);
  };
  if (t["fit"]) {
    if (t["fit"]["train_dataloader"]) add(t["fit"]["train_dataloader"]);
    if (t["fit"]["val_dataloader"]) add(t["fit"]["val_dataloader"]);
  }
  if (t["validate"] && t["validate"]["val_dataloader"]) add(t["validate"]["val_dataloader"]);
  if (t["validate_all"] && t["validate_all"]["val_dataloaders"]) add(t["validate_all"]["val_dataloaders"]);
  return out;
}

void shrink_steps(YAML::Node root) {
  if (root["trainer"]) {
    // A fine-tuning config's base checkpoint is the user's: the sweep starts from initialized weights.
    for (const char* stage : {"fit", "validate"})
      if (root["trainer"][stage]) root["trainer"][stage].remove("ckpt_path");
    YAML::Node init = root["trainer"]["init"];
    YAML::Node loop = init["loop"];
    loop.remove("num_steps");
    loop.remove("num_epochs");
    loop["max_steps"] = 4;
    loop["eval_frequency"] = 2;
    loop["eval_steps"] = 1;
    init["checkpoint"]["steps"] = 2;
    init["logging"]["log_steps"] = 1;
    return;
  }
  YAML::Node rc = root["runconfig"];
  rc.remove("checkpoint_path");
  rc.remove("num_steps");
  rc["max_steps"] = 4;
  if (rc["num_epochs"]) {  // two epochs of two steps, an evaluation after each
    rc["num_epochs"] = 2;
    rc["steps_per_epoch"] = 2;
  } else {
    set_if_given(rc, "steps_per_epoch", YAML::Node(2));
    rc["eval_frequency"] = 2;
  }
  rc["eval_steps"] = 1;
  rc["checkpoint_steps"] = 2;
  rc["log_steps"] = 1;
}

class ConfigSweep : public ::testing::TestWithParam<std::string> {};

// The config's own params, shrunk, with its data made; train_and_eval then
// eval_all: four finite training losses, an evaluation after each segment,
// and every checkpoint evaluated by eval_all.
TEST_P(ConfigSweep, TrainsAndEvaluatesAsWritten) {
  const std::string file = zoo::testing::source_dir() + "/" + GetParam();
  TempDir dir;
  YAML::Node root = unshared(config::load_yaml_file(file));
  YAML::Node model = root["trainer"] ? root["trainer"]["init"]["model"] : root["model"];
  const std::vector<YAML::Node> sections = data_sections(root);
  ASSERT_FALSE(sections.empty()) << file;
  DataShape shape;
  for (size_t i = 0; i < sections.size(); ++i) {
    // The section's processor, or the one its family reads (fc_mnist's sections name none).
    std::string processor;
    if (sections[i]["data_processor"]) processor = sections[i]["data_processor"].as<std::string>();
    else if (model["name"]) processor = models::find_model(model["name"].as<std::string>()).default_data_processor;
    else processor = load_params(file, YAML::Node()).train_input->processor();  // the family the keys pick
    make_data(processor, sections[i], model, dir / ("data" + std::to_string(i)), i > 0, shape);
  }
  shrink_model(model, shape);
  shrink_steps(root);
  YAML::Emitter out;
  out << root;
  const std::string params = zoo::testing::write_file(dir / "params.yaml", out.c_str());
  const std::string run = zoo::testing::zoo_binary() + " CPU --params " + params + " --model_dir " + (dir / "model");

  auto trained = zoo::testing::run_command(run + " --mode train_and_eval");
  ASSERT_EQ(trained.exit_code, 0) << GetParam() << "\n" << out.c_str() << "\n" << trained.output;
  const std::vector<double> losses = zoo::testing::train_losses(trained.output);
  EXPECT_EQ(losses.size(), 4u) << trained.output;  // a NaN or inf loss is not counted
  const std::regex eval_loss("Avg Eval Loss: ([-0-9.e+]+)\n");
  auto eval_losses = [&](const std::string& output) {
    std::vector<double> v;
    for (auto it = std::sregex_iterator(output.begin(), output.end(), eval_loss); it != std::sregex_iterator(); ++it)
      v.push_back(std::stod((*it)[1]));
    return v;
  };
  const std::vector<double> evals = eval_losses(trained.output);
  EXPECT_EQ(evals.size(), 2u) << trained.output;
  for (double v : evals) EXPECT_TRUE(std::isfinite(v)) << trained.output;

  const auto checkpoints = ckpt::list_checkpoints(dir / "model");
  EXPECT_GE(checkpoints.size(), 2u);
  auto all = zoo::testing::run_command(run + " --mode eval_all");
  ASSERT_EQ(all.exit_code, 0) << all.output;
  EXPECT_EQ(eval_losses(all.output).size(), checkpoints.size()) << all.output;
}

INSTANTIATE_TEST_SUITE_P(RealConfigs, ConfigSweep, ::testing::ValuesIn(sweep_configs()), test_name);

}  // namespace
