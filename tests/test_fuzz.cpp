// Seeded fuzzing, bounded to a few hundred cases: mutated params files (the
// configs in configs/, and the real modelzoo configs in ../shared when it is
// there) and mutated tiny HDF5 files. Whatever the input, zoo ends with exit
// code 0 or 1 in bounded time, never a signal (which would end this test
// binary), and every error names the file at fault.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <sstream>

#include "data/create_hdf5.h"
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
  add_dir(zoo::testing::shared_dir() + "/modelzoo_configs", true);
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
  static const std::vector<std::string> values = {
      "-1", "0", "1e30", "-1e-30", "abc", "[]", "{}", "null", "~", "9223372036854775807", "99999999999999999999",
      "true", "''", "0.5", "[1, 2]", "{a: 1}", ".nan", ".inf", "2048", "-0.0", "1.5", "\"x: y\"", "[[]]", "!!binary aGk="};
  static const std::vector<std::string> stray = {"  foo: 1", "bar:", "- x", "key: : :", "\t", "  ? [a]\n  : 1",
                                                 "&a x: *a", "...", "---", "runconfig:", "  model:", "%"};
  std::vector<std::string> lines = lines_of(text);
  const size_t edits = 1 + pick(rng, 3);
  for (size_t e = 0; e < edits && !lines.empty(); ++e) {
    const size_t at = pick(rng, lines.size());
    std::string& line = lines[at];
    const size_t colon = line.find(": ");
    switch (pick(rng, 8)) {
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
                     ? line.substr(0, indent) + other.substr(other.find_first_not_of(' '), c - other.find_first_not_of(' ')) + line.substr(colon)
                     : line.substr(0, colon) + "s" + line.substr(colon);
        }
        break;
      case 5: lines.insert(lines.begin() + static_cast<long>(at), stray[pick(rng, stray.size())]); break;
      case 6: lines.resize(at + 1), line = line.substr(0, pick(rng, line.size() + 1)); break;
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
    if (zoo::testing::run_in_process({"CPU", "--params", f, "--mode", "train", "--validate_only"}).code == 0) seeds.push_back(f);
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
    const auto o = zoo::testing::run_in_process({"CPU", "--params", dir / file, "--mode", modes[pick(rng, 4)], "--validate_only"});
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
        for (size_t k = 1 + pick(rng, 8); k > 0; --k) bytes[pick(rng, bytes.size())] ^= static_cast<char>(1 + pick(rng, 255));
        break;
      case 1: bytes.resize(pick(rng, bytes.size())); break;  // truncated
      default: {  // a zeroed range
        const size_t at = pick(rng, bytes.size());
        std::fill(bytes.begin() + static_cast<long>(at), bytes.begin() + static_cast<long>(std::min(bytes.size(), at + 1 + pick(rng, 512))), '\0');
      }
    }
    const std::string case_dir = dir / ("case_" + std::to_string(i));
    std::ofstream(zoo::testing::write_file(case_dir + "/examples_0.h5", ""), std::ios::binary) << bytes;
    for (const char* processor : {"GptHDF5DataProcessor", "GptHDF5MapDataProcessor"}) {
      try {
        auto loader = zoo::testing::open_loader(std::string("{data_processor: ") + processor +
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
