// Seeded fuzzing, bounded to a few hundred cases: mutated params files (the
// configs in configs/ and the real modelzoo configs in tests/modelzoo_configs;
// anchors and aliases among the mutations), mutated tiny HDF5 files,
// gzip input for create-hdf5 and Hugging Face directories for zoo convert. Whatever the input, zoo ends with exit
// code 0 or 1 in bounded time, never a signal (which would end this test
// binary), and every error names the file at fault.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "data/create_hdf5.h"
#include "models/registry.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/convert/convert.h"
#include "runner/run.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

namespace fs = std::filesystem;
using Rng = std::mt19937_64;

// ZOO_FUZZ_CASES and ZOO_FUZZ_SEED widen a search by hand (CI keeps the defaults).
int64_t setting(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::stoll(v) : fallback;
}

size_t pick(Rng& rng, size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }

std::vector<std::string> seed_configs() {
  std::vector<std::string> out;
  auto add_dir = [&](const fs::path& dir, bool recursive) {
    if (!fs::is_directory(dir)) return;
    auto add = [&](const fs::path& p) {
      if (p.extension() == ".yaml" && p.string().find("/schema/") == std::string::npos) out.push_back(p.string());
    };
    if (recursive)
      for (const auto& e : fs::recursive_directory_iterator(dir)) add(e.path());
    else
      for (const auto& e : fs::directory_iterator(dir)) add(e.path());
  };
  add_dir(zoo::testing::source_dir() + "/configs", true);
  add_dir(zoo::testing::modelzoo_configs_dir(), true);
  std::sort(out.begin(), out.end());  // the seed alone decides the cases
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// One to three edits a hand or a bad merge makes: lines dropped, repeated or
// re-indented, values and keys swapped for odd ones, stray lines, a cut-off
// file, a stray byte.
std::string mutate(const std::string& text, Rng& rng) {
  static const std::vector<std::string> values = {"-1",
                                                  "0",
                                                  "1e30",
                                                  "-1e-30",
                                                  "abc",
                                                  "[]",
                                                  "{}",
                                                  "null",
                                                  "~",
                                                  "9223372036854775807",
                                                  "99999999999999999999",
                                                  "true",
                                                  "''",
                                                  "0.5",
                                                  "[1, 2]",
                                                  "{a: 1}",
                                                  ".nan",
                                                  ".inf",
                                                  "2048",
                                                  "-0.0",
                                                  "1.5",
                                                  "\"x: y\"",
                                                  "[[]]",
                                                  "!!binary aGk="};
  static const std::vector<std::string> stray = {"  foo: 1",           "bar:",     "- x",
                                                 "key: : :",           "\t",       "  ? [a]\n  : 1",
                                                 "&a x: *a",           "...",      "---",
                                                 "runconfig:",         "  model:", "%",
                                                 "  loop: &z {a: *z}", "  <<: *z", "  list: &y [1, *y]",
                                                 "  x: *nowhere"};
  std::vector<std::string> lines = lines_of(text);
  const size_t edits = 1 + pick(rng, 3);
  for (size_t e = 0; e < edits && !lines.empty(); ++e) {
    const size_t at = pick(rng, lines.size());
    std::string& line = lines[at];
    const size_t colon = line.find(": ");
    switch (pick(rng, 9)) {
      case 0: lines.erase(lines.begin() + static_cast<long>(at)); break;
      case 1: lines.insert(lines.begin() + static_cast<long>(at), line); break;
      case 2: line = pick(rng, 2) ? "  " + line : line.substr(std::min<size_t>(2, line.size())); break;
      case 3:
        if (colon != std::string::npos) line = line.substr(0, colon + 2) + values[pick(rng, values.size())];
        break;
      case 4:  // another line's key, or a near-miss of this one
        if (colon != std::string::npos) {
          const std::string& other = lines[pick(rng, lines.size())];
          const size_t c = other.find(": ");
          const size_t indent = line.find_first_not_of(' ');
          line = pick(rng, 2) && c != std::string::npos
                     ? line.substr(0, indent) +
                           other.substr(other.find_first_not_of(' '), c - other.find_first_not_of(' ')) +
                           line.substr(colon)
                     : line.substr(0, colon) + "s" + line.substr(colon);
        }
        break;
      case 5: lines.insert(lines.begin() + static_cast<long>(at), stray[pick(rng, stray.size())]); break;
      case 6: lines.resize(at + 1), line = line.substr(0, pick(rng, line.size() + 1)); break;
      case 7:  // an anchor on a section or key, and an alias to it on some line of the file (inside it: a loop)
        if (!line.empty() && line.back() == ':') {
          line += " &s" + std::to_string(at);
          std::string& other = lines[pick(rng, lines.size())];
          const size_t c = other.find(": ");
          if (c != std::string::npos) other = other.substr(0, c + 2) + "*s" + std::to_string(at);
          else if (!other.empty() && other.back() == ':') other += " *s" + std::to_string(at);
        }
        break;
      default: line.insert(pick(rng, line.size() + 1), 1, static_cast<char>(pick(rng, 256))); break;
    }
  }
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace

TEST(Fuzz, MutatedParamsFilesEndInZeroOrOneAndEveryErrorNamesTheFile) {
  // Files zoo accepts as they are, so that each refusal is the mutation's doing.
  std::vector<std::string> seeds;
  for (const auto& f : seed_configs())
    if (zoo::testing::run_in_process({"CPU", "--params", f, "--mode", "train", "--validate_only"}).code == 0)
      seeds.push_back(f);
  ASSERT_GE(seeds.size(), 8u);  // configs/ alone has 8
  TempDir dir;
  Rng rng(static_cast<uint64_t>(setting("ZOO_FUZZ_SEED", 20261123)));
  const char* modes[] = {"train", "eval", "train_and_eval", "eval_all"};
  int errors = 0;
  const int cases = static_cast<int>(setting("ZOO_FUZZ_CASES", 300));
  for (int i = 0; i < cases; ++i) {
    const std::string& seed = seeds[pick(rng, seeds.size())];
    const std::string text = mutate(zoo::testing::read_file(seed), rng);
    const std::string file = "fuzz_" + std::to_string(i) + ".yaml";
    zoo::testing::write_file(dir / file, text);
    const auto o =
        zoo::testing::run_in_process({"CPU", "--params", dir / file, "--mode", modes[pick(rng, 4)], "--validate_only"});
    const std::string what = "case " + std::to_string(i) + " (from " + seed + "):\n" + text + "\n" + o.error;
    ASSERT_TRUE(o.code == 0 || o.code == 1) << what;
    EXPECT_LT(o.seconds, 30.0) << what;
    if (o.code == 1) {
      ++errors;
      EXPECT_NE(o.error.find(file), std::string::npos) << what;
    }
  }
  // Most mutations must break something, and some not, or this tests little.
  std::cout << "params cases: " << cases - errors << " accepted, " << errors << " refused\n";
  EXPECT_GT(errors, cases / 3);
  EXPECT_LT(errors, cases);
}

TEST(Fuzz, MutatedHdf5FilesAreReadOrTheErrorNamesTheFile) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 300; ++i) text += "sample text " + std::to_string(i * 7919 % 1000) + ". ";
  zoo::testing::write_file(dir / "text/doc.txt", text);
  data::CreateHdf5Options o;
  o.input_dir = dir / "text";
  o.output_dir = dir / "clean";
  o.tokenizer.type = "ByteTokenizer";
  o.max_seq_length = 16;
  o.eos_id = 0;
  std::stringstream progress;
  data::create_hdf5(o, progress);
  const std::string clean = zoo::testing::read_file(dir / "clean/examples_0.h5");
  ASSERT_GT(clean.size(), 1000u);

  Rng rng(static_cast<uint64_t>(setting("ZOO_FUZZ_SEED", 7)));
  int read_fine = 0, refused = 0;
  const int cases = static_cast<int>(setting("ZOO_FUZZ_CASES", 300) * 2 / 5);
  for (int i = 0; i < cases; ++i) {
    std::string bytes = clean;
    switch (pick(rng, 3)) {
      case 0:  // flipped bytes anywhere: metadata, chunk index or compressed data
        for (size_t k = 1 + pick(rng, 8); k > 0; --k)
          bytes[pick(rng, bytes.size())] ^= static_cast<char>(1 + pick(rng, 255));
        break;
      case 1: bytes.resize(pick(rng, bytes.size())); break;  // truncated
      default: {                                             // a zeroed range
        const size_t at = pick(rng, bytes.size());
        std::fill(bytes.begin() + static_cast<long>(at),
                  bytes.begin() + static_cast<long>(std::min(bytes.size(), at + 1 + pick(rng, 512))), '\0');
      }
    }
    const std::string case_dir = dir / ("case_" + std::to_string(i));
    std::ofstream(zoo::testing::write_file(case_dir + "/examples_0.h5", ""), std::ios::binary) << bytes;
    for (const char* processor : {"GptHDF5DataProcessor", "GptHDF5MapDataProcessor"}) {
      try {
        auto loader =
            zoo::testing::open_loader(std::string("{data_processor: ") + processor +
                                      ", batch_size: 2, max_sequence_length: 16, data_dir: " + case_dir + "}");
        loader->check_token_ids(256);
        for (int64_t b = 0; b < loader->batches_per_epoch(); ++b) loader->next();
        ++read_fine;
      } catch (const std::exception& e) {
        ++refused;
        EXPECT_NE(std::string(e.what()).find(case_dir + "/examples_0.h5"), std::string::npos)
            << "case " << i << " " << processor << ": " << e.what();
      }
    }
  }
  std::cout << "HDF5 cases: " << read_fine << " read, " << refused << " refused\n";
  EXPECT_GT(refused, 0);
  EXPECT_GT(read_fine, 0);  // flips inside padding or unused space change nothing
}

// gzip input for `zoo data create-hdf5`: a good .txt.gz and .jsonl.gz with
// flipped bytes, cut short or zeroed. Each either converts or ends in an
// error naming the file; a damaged stream is never read as a shorter one.
TEST(Fuzz, MutatedGzipInputToCreateHdf5ConvertsOrNamesTheFile) {
  TempDir dir;
  std::string text, jsonl;
  for (int i = 0; i < 400; ++i) {
    text += "line " + std::to_string(i * 7919 % 1000) + " of the text\n";
    jsonl += "{\"text\": \"document " + std::to_string(i) + "\"}\n";
  }
  zoo::testing::write_file(dir / "src/doc.txt", text);
  zoo::testing::write_file(dir / "src/doc.jsonl", jsonl);
  ASSERT_EQ(zoo::testing::run_command("gzip " + (dir / "src/doc.txt") + " " + (dir / "src/doc.jsonl")).exit_code, 0);
  Rng rng(static_cast<uint64_t>(setting("ZOO_FUZZ_SEED", 11)));
  int converted = 0, refused = 0;
  const int cases = static_cast<int>(setting("ZOO_FUZZ_CASES", 300) / 5);
  for (int i = 0; i < cases; ++i) {
    const std::string name = pick(rng, 2) ? "doc.txt.gz" : "doc.jsonl.gz";
    std::string bytes = zoo::testing::read_file(dir / ("src/" + name));
    switch (pick(rng, 3)) {
      case 0:
        for (size_t k = 1 + pick(rng, 4); k > 0; --k)
          bytes[pick(rng, bytes.size())] ^= static_cast<char>(1 + pick(rng, 255));
        break;
      case 1: bytes.resize(pick(rng, bytes.size())); break;
      default: {
        const size_t at = pick(rng, bytes.size());
        std::fill(bytes.begin() + static_cast<long>(at),
                  bytes.begin() + static_cast<long>(std::min(bytes.size(), at + 1 + pick(rng, 64))), '\0');
      }
    }
    const std::string case_dir = dir / ("case_" + std::to_string(i));
    std::ofstream(zoo::testing::write_file(case_dir + "/" + name, ""), std::ios::binary) << bytes;
    data::CreateHdf5Options o;
    o.input_dir = case_dir;
    o.output_dir = case_dir + "/out";
    o.tokenizer.type = "ByteTokenizer";
    o.max_seq_length = 16;
    o.eos_id = 0;
    std::stringstream progress;
    try {
      data::create_hdf5(o, progress);
      ++converted;
    } catch (const std::exception& e) {
      ++refused;
      EXPECT_NE(std::string(e.what()).find(case_dir + "/" + name), std::string::npos)
          << "case " << i << ": " << e.what();
    }
  }
  std::cout << "gzip cases: " << converted << " converted, " << refused << " refused\n";
  EXPECT_GT(refused, cases / 2);  // gzip's CRC catches nearly every change
}

namespace {

// Hugging Face directories of a GPT-2 and a LLaMA exported from tiny zoo models.
std::vector<std::string> hf_sources(const TempDir& dir) {
  const std::string llama_model =
      "  vocab_size: 64\n  hidden_size: 32\n  num_hidden_layers: 1\n  num_heads: 4\n  filter_size: 48\n"
      "  max_position_embeddings: 32\n  position_embedding_type: rotary\n  rotary_dim: 8\n  nonlinearity: swiglu\n"
      "  norm_type: rmsnorm\n  use_projection_bias_in_attention: false\n  use_ffn_bias_in_attention: false\n"
      "  use_ffn_bias: false\n  use_bias_in_output: false\n  share_embedding_weights: false\n"
      "  attention_module: multiquery_attention\n  extra_attention_params: {num_kv_groups: 2}\n";
  std::vector<std::string> sources;
  for (const std::string kind : {"gpt2", "llama"}) {
    std::string y = zoo::testing::tiny_params_yaml(dir / "data", dir / ("m_" + kind));
    if (kind == "llama")
      y.replace(y.find("model:\n"), y.find("optimizer:") - y.find("model:\n"), "model:\n" + llama_model);
    const std::string params = zoo::testing::write_file(dir / (kind + ".yaml"), y);
    Params p = load_params(params, YAML::Node());
    auto model = p.model->build(torch::TensorOptions());
    c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
    d.insert("model", ckpt::model_state_dict(*model));
    d.insert("global_step", int64_t{0});
    d.insert("__metadata__", ckpt::checkpoint_metadata(p));
    const std::string ckpt_path = dir / (kind + ".mdl");
    ckpt::save_checkpoint_file(ckpt_path, d);
    convert::run_convert({ckpt_path, kind, "zoo", "hf", std::nullopt, dir / ("hf_" + kind)});
    sources.push_back(dir / ("hf_" + kind));
  }
  return sources;
}

// An error of zoo convert on a mutated directory: names the directory or config.json, in words (no raw parser
// exception text).
void expect_named(const std::string& message, const std::string& case_dir, const std::string& what) {
  EXPECT_TRUE(message.find(case_dir) != std::string::npos || message.find("config.json") != std::string::npos)
      << what << "\n"
      << message;
  EXPECT_EQ(message.find("[json.exception"), std::string::npos) << what << "\n" << message;
}

}  // namespace

// Hugging Face directories for `zoo convert`: a GPT-2 and a LLaMA export of
// tiny zoo models, their config.json fields dropped or changed to odd
// values (head counts, sizes, types) and their safetensors cut or flipped.
// Each converts or ends in an error naming a file, field or tensor; none
// writes out of bounds or aborts (this test binary would die).
TEST(Fuzz, MutatedHuggingFaceDirectoriesConvertOrNameTheirFault) {
  TempDir dir;
  const std::vector<std::string> sources = hf_sources(dir);
  static const std::vector<nlohmann::json> odd = {0,
                                                  -1,
                                                  1,
                                                  2,
                                                  3,
                                                  5,
                                                  7,
                                                  16,
                                                  64,
                                                  1000000,
                                                  1.5,
                                                  "4",
                                                  nullptr,
                                                  true,
                                                  nlohmann::json::array(),
                                                  nlohmann::json::object()};
  Rng rng(static_cast<uint64_t>(setting("ZOO_FUZZ_SEED", 13)));
  int converted = 0, refused = 0;
  const int cases = static_cast<int>(setting("ZOO_FUZZ_CASES", 300) / 3);
  for (int i = 0; i < cases; ++i) {
    const std::string& source = sources[pick(rng, sources.size())];
    const std::string case_dir = dir / ("case_" + std::to_string(i));
    fs::create_directories(case_dir);
    nlohmann::json config = nlohmann::json::parse(zoo::testing::read_file(source + "/config.json"));
    std::string weights = zoo::testing::read_file(source + "/model.safetensors");
    for (size_t e = 1 + pick(rng, 2); e > 0; --e) {
      std::vector<std::string> keys;
      for (const auto& [k, v] : config.items()) keys.push_back(k);
      const std::string key = keys[pick(rng, keys.size())];
      switch (pick(rng, 4)) {
        case 0: config.erase(key); break;
        case 1: weights.resize(pick(rng, weights.size())); break;
        case 2: weights[pick(rng, weights.size())] ^= static_cast<char>(1 + pick(rng, 255)); break;
        default: config[key] = odd[pick(rng, odd.size())];
      }
    }
    zoo::testing::write_file(case_dir + "/config.json", config.dump());
    std::ofstream(case_dir + "/model.safetensors", std::ios::binary) << weights;
    const std::string what = "case " + std::to_string(i) + ": " + config.dump();
    try {
      convert::run_convert({case_dir, "", "hf", "zoo", std::nullopt, case_dir + "/zoo"});
      ++converted;
    } catch (const std::exception& e) {
      ++refused;
      expect_named(e.what(), case_dir, what);
    }
  }
  std::cout << "Hugging Face cases: " << converted << " converted, " << refused << " refused\n";
  EXPECT_GT(refused, cases / 3);
  EXPECT_GT(converted, 0);  // a field Hugging Face ignores, changed, converts
}

// Every number of config.json and every field of a safetensors header entry, set in turn to each odd value: the
// directory converts, or the error names the file and the key or tensor in words (a head count of 0 divided by zero).
TEST(Fuzz, EachConfigNumberAndHeaderFieldSetToOddValuesConvertsOrIsNamed) {
  TempDir dir;
  const std::vector<std::string> sources = hf_sources(dir);
  static const std::vector<nlohmann::json> odd = {
      0, -1, 2.5, 1e30, "4", nullptr, nlohmann::json::array(), nlohmann::json::object()};
  int converted = 0, refused = 0, n = 0;
  auto attempt = [&](const std::string& source, const nlohmann::json& config, const std::string& weights,
                     const std::string& what) {
    const std::string case_dir = dir / ("case_" + std::to_string(n++));
    fs::create_directories(case_dir);
    zoo::testing::write_file(case_dir + "/config.json", config.dump());
    std::ofstream(case_dir + "/model.safetensors", std::ios::binary) << weights;
    try {
      convert::run_convert({case_dir, "", "hf", "zoo", std::nullopt, case_dir + "/zoo"});
      ++converted;
    } catch (const std::exception& e) {
      ++refused;
      expect_named(e.what(), case_dir, source + ": " + what);
    }
    fs::remove_all(case_dir);
  };
  for (const std::string& source : sources) {
    const nlohmann::json config = nlohmann::json::parse(zoo::testing::read_file(source + "/config.json"));
    const std::string weights = zoo::testing::read_file(source + "/model.safetensors");
    for (const auto& [key, value] : config.items()) {
      if (!value.is_number()) continue;
      for (const auto& v : odd) {
        nlohmann::json c = config;
        c[key] = v;
        attempt(source, c, weights, key + " = " + v.dump());
      }
    }
    uint64_t header_size = 0;
    std::memcpy(&header_size, weights.data(), 8);
    const nlohmann::json header = nlohmann::json::parse(weights.substr(8, header_size));
    const std::string tensor =
        header.begin().key() == "__metadata__" ? std::next(header.begin()).key() : header.begin().key();
    for (const char* field : {"dtype", "shape", "data_offsets"})
      for (const auto& v : odd) {
        nlohmann::json h = header;
        h[tensor][field] = v;
        const std::string text = h.dump();
        const uint64_t size = text.size();
        attempt(source, config,
                std::string(reinterpret_cast<const char*>(&size), 8) + text + weights.substr(8 + header_size),
                tensor + "." + field + " = " + v.dump());
      }
  }
  std::cout << "config and header cases: " << converted << " converted, " << refused << " refused\n";
  EXPECT_GT(refused, n / 2);
}
