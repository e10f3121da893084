// modelzoo HDF5 datasets: `zoo data create-hdf5 LMData` output read back by
// h5py (Debian's python3-h5py), and by zoo's own processors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "data/registry.h"
#include "data/text/byte_bpe.h"
#include "test_util.h"

namespace zoo {
using testing::TempDir;

namespace {

bool have_h5py() { return testing::run_command("/usr/bin/python3 -c 'import h5py, numpy'").exit_code == 0; }
#define ZOO_SKIP_WITHOUT_H5PY() \
  if (!have_h5py()) GTEST_SKIP() << "/usr/bin/python3 with python3-h5py and python3-numpy is not installed"

// Every *.h5 in `dir` as h5py sees it: {file: {shape, chunks, compression, n_examples, data}}.
nlohmann::json h5py_dump(const std::string& dir) {
  TempDir tmp;
  const std::string script = testing::write_file(tmp / "dump.py", R"PY(
import sys, glob, os, json, h5py
out = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.h5"))):
    with h5py.File(path, "r") as h:
        d = h["data"]
        out[os.path.basename(path)] = {"shape": list(d.shape), "chunks": list(d.chunks), "dtype": str(d.dtype),
            "compression": d.compression, "n_examples": int(h.attrs["n_examples"]), "data": d[()].tolist()}
print(json.dumps(out))
)PY");
  const auto r = testing::run_command("/usr/bin/python3 " + script + " " + dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

// The samples modelzoo's LMData makes from one token stream: chunks of
// msl + 1, the last padded; input_ids / loss mask / labels rows.
std::vector<std::vector<int32_t>> expected_rows(const std::vector<int32_t>& stream, int msl, int32_t pad) {
  std::vector<std::vector<int32_t>> samples;
  for (size_t at = 0; at + 1 < stream.size(); at += msl + 1) {
    const size_t n = std::min<size_t>(msl + 1, stream.size() - at) - 1;
    std::vector<int32_t> ids(msl, pad), mask(msl, 0), labels(msl, pad);
    for (size_t t = 0; t < n; ++t) ids[t] = stream[at + t], mask[t] = 1, labels[t] = stream[at + t + 1];
    std::vector<int32_t> row = ids;
    row.insert(row.end(), mask.begin(), mask.end());
    row.insert(row.end(), labels.begin(), labels.end());
    samples.push_back(row);
  }
  return samples;
}

std::string zoo_create_hdf5(const std::string& args) {
  return testing::zoo_binary() + " data create-hdf5 LMData " + args;
}

}  // namespace

TEST(CreateHdf5, H5pyReadsWhatZooWritesAndZooReadsItBack) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  const std::vector<std::string> docs = {"A first document, plain text.\nTwo lines, and more words to fill a third file.", "jsonl one", "jsonl two: naïve ☃",
                                         "x", "nested file, last"};
  testing::write_file(dir / "in/a.txt", docs[0]);
  testing::write_file(dir / "in/b.jsonl", "{\"text\": \"jsonl one\", \"id\": 1}\n\n{\"text\": \"jsonl two: naïve ☃\"}\n"
                                          "{\"text\": \"x\"}\n");
  testing::write_file(dir / "in/sub/c.txt", docs[4]);
  testing::write_file(dir / "in/notes.md", "not input");
  const auto r = testing::run_command(zoo_create_hdf5("--input_dir " + (dir / "in") + " --output_dir " + (dir / "out") +
                                                      " --tokenizer_type ByteTokenizer --eos_id 3 --pad_id 0 "
                                                      "--max_seq_length 16 --files_per_record 3"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("skipping " + (dir / "in/notes.md")), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[##############################] 3/3 files"), std::string::npos) << r.output;

  std::vector<int32_t> stream;
  for (const auto& d : docs) {
    for (unsigned char c : d) stream.push_back(c);
    stream.push_back(3);
  }
  const auto want = expected_rows(stream, 16, 0);
  ASSERT_NE(want.size() % 3, 0u) << want.size();  // the last file holds fewer samples
  const nlohmann::json files = h5py_dump(dir / "out");
  ASSERT_EQ(files.size(), (want.size() + 2) / 3);
  size_t next = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    const auto& h = files.at("examples_" + std::to_string(f) + ".h5");
    const size_t k = std::min<size_t>(3, want.size() - 3 * f);
    EXPECT_EQ(h["shape"], nlohmann::json({k, 3, 16}));
    EXPECT_EQ(h["chunks"], nlohmann::json({1, 3, 16}));
    EXPECT_EQ(h["compression"], "gzip");
    EXPECT_EQ(h["dtype"], "int32");
    EXPECT_EQ(h["n_examples"], k);
    for (const auto& sample : h["data"]) {
      std::vector<int32_t> row;
      for (const auto& r3 : sample) row.insert(row.end(), r3.begin(), r3.end());
      EXPECT_EQ(row, want[next]) << "sample " << next;
      ++next;
    }
  }
  const auto params = nlohmann::json::parse(testing::read_file(dir / "out/data_params.json"));
  EXPECT_EQ(params["post-process"]["n_examples"], want.size());
  EXPECT_EQ(params["post-process"]["n_documents"], docs.size());

  // zoo's map-style processor reads the same samples in the same order.
  YAML::Node section = YAML::Load("{data_processor: GptHDF5MapDataProcessor, batch_size: 1, data_dir: " + (dir / "out") + "}");
  config::Context ctx{"in.yaml", "train_input", nullptr};
  auto loader = data::find_data_processor(section, ctx).build(section, ctx);
  for (size_t i = 0; i < want.size(); ++i) {
    data::Features b = loader->next();
    std::vector<int32_t> row;
    for (const char* key : {"input_ids", "attention_mask", "labels"}) {
      auto t = b.at(key)[0].to(torch::kInt).contiguous();
      row.insert(row.end(), t.data_ptr<int32_t>(), t.data_ptr<int32_t>() + 16);
    }
    EXPECT_EQ(row, want[i]) << "sample " << i;
  }

  // A second run into the same directory refuses and leaves the dataset alone.
  const auto before = testing::read_file(dir / "out/examples_0.h5");
  const auto again = testing::run_command(zoo_create_hdf5("--input_dir " + (dir / "in") + " --output_dir " + (dir / "out") +
                                                          " --tokenizer_type ByteTokenizer --eos_id 3"));
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.output.find("already holds"), std::string::npos) << again.output;
  EXPECT_EQ(testing::read_file(dir / "out/examples_0.h5"), before);
}

TEST(CreateHdf5, UnpackedDocumentsEachStartASampleWithGpt2Tokens) {
  ZOO_SKIP_WITHOUT_H5PY();
  const std::string encoder = testing::gpt3_encoder_dir();
  ZOO_SKIP_WITHOUT_GPT3_ENCODER(encoder);
  TempDir dir;
  testing::write_file(dir / "in/docs.jsonl", "{\"body\": \"Hello world\"}\n{\"body\": \"The quick brown fox.\"}\n");
  const auto r = testing::run_command(zoo_create_hdf5(
      "--input_dir " + (dir / "in") + " --output_dir " + (dir / "out") + " --tokenizer_type GPT2Tokenizer --vocab_file " +
      encoder + "/vocab.bpe --encoder_file " + encoder + "/encoder.json --jsonl_key body --max_seq_length 8 "
      "--pack_sequences false"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto bpe = text::ByteLevelBpe::from_gpt2_files(encoder + "/encoder.json", encoder + "/vocab.bpe");
  // Without packing each document (plus eos 50256, the default, also the pad) is its own sample.
  std::vector<std::vector<int32_t>> want;
  for (const char* d : {"Hello world", "The quick brown fox."}) {
    auto ids = bpe->encode(d);
    ids.push_back(50256);
    auto rows = expected_rows(ids, 8, 50256);
    want.insert(want.end(), rows.begin(), rows.end());
  }
  EXPECT_EQ(want[0][0], 15496);  // "Hello"
  const auto files = h5py_dump(dir / "out");
  std::vector<std::vector<int32_t>> got;
  for (const auto& sample : files.at("examples_0.h5")["data"]) {
    std::vector<int32_t> row;
    for (const auto& r3 : sample) row.insert(row.end(), r3.begin(), r3.end());
    got.push_back(row);
  }
  EXPECT_EQ(got, want);

  testing::write_file(dir / "bad/docs.jsonl", "{\"body\": \"ok\"}\n{\"text\": \"wrong key\"}\n");
  const auto bad = testing::run_command(zoo_create_hdf5("--input_dir " + (dir / "bad") + " --output_dir " +
                                                        (dir / "out2") + " --tokenizer_type ByteTokenizer --eos_id 0 "
                                                        "--jsonl_key body"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find((dir / "bad/docs.jsonl") + ":2: expected a string under key 'body'"), std::string::npos)
      << bad.output;
}

}  // namespace zoo
