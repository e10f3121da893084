// modelzoo HDF5 datasets: `zoo data create-hdf5 LMData` output read back by
// h5py (Debian's python3-h5py), and by zoo's own processors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "data/registry.h"
#include "data/text/hf_pipeline.h"
#include "test_util.h"
#include "tests/hdf5_fixtures.h"

namespace zoo {
using testing::EnvGuard;
using testing::h5py_dump;
using testing::open_error;
using testing::open_loader;
using testing::TempDir;

namespace {

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
  const std::vector<std::string> docs = {
      "A first document, plain text.\nTwo lines, and more words to fill a third file.", "jsonl one",
      "jsonl two: naïve ☃", "x", "nested file, last"};
  testing::write_file(dir / "in/a.txt", docs[0]);
  testing::write_file(dir / "in/b.jsonl",
                      "{\"text\": \"jsonl one\", \"id\": 1}\n\n{\"text\": \"jsonl two: naïve ☃\"}\n"
                      "{\"text\": \"x\"}\n");
  testing::write_file(dir / "in/sub/c.txt", docs[4]);
  ASSERT_EQ(testing::run_command("gzip " + (dir / "in/sub/c.txt")).exit_code, 0);  // read as sub/c.txt.gz
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
  YAML::Node section =
      YAML::Load("{data_processor: GptHDF5MapDataProcessor, batch_size: 1, data_dir: " + (dir / "out") + "}");
  config::Context ctx{"in.yaml", "train_input", nullptr};
  auto loader = data::open_input(section, ctx);
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
  const auto again = testing::run_command(zoo_create_hdf5(
      "--input_dir " + (dir / "in") + " --output_dir " + (dir / "out") + " --tokenizer_type ByteTokenizer --eos_id 3"));
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
  const auto r = testing::run_command(zoo_create_hdf5("--input_dir " + (dir / "in") + " --output_dir " + (dir / "out") +
                                                      " --tokenizer_type GPT2Tokenizer --vocab_file " + encoder +
                                                      "/vocab.bpe --encoder_file " + encoder +
                                                      "/encoder.json --jsonl_key body --max_seq_length 8 "
                                                      "--pack_sequences false"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto bpe = text::gpt2_tokenizer(encoder + "/encoder.json", encoder + "/vocab.bpe");
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

  // A bad line fails the run with the file and line, after a first file was
  // written (files_per_record 1); the run's files are removed again.
  testing::write_file(dir / "bad/a.jsonl", "{\"body\": \"one document, long enough for a sample\"}\n");
  testing::write_file(dir / "bad/b.jsonl", "{\"body\": \"ok\"}\n{\"text\": \"wrong key\"}\n");
  const auto bad =
      testing::run_command(zoo_create_hdf5("--input_dir " + (dir / "bad") + " --output_dir " + (dir / "out2") +
                                           " --tokenizer_type ByteTokenizer --eos_id 0 "
                                           "--jsonl_key body --max_seq_length 8 --files_per_record 1"));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find((dir / "bad/b.jsonl") + ":2: expected a string under key 'body'"), std::string::npos)
      << bad.output;
  EXPECT_NE(bad.output.find("1/2 files"), std::string::npos) << bad.output;  // the first file's samples were written
  EXPECT_TRUE(std::filesystem::is_empty(dir / "out2"));
}

namespace {

// h5py-written sample files (msl 8, as modelzoo writes them), one per count:
// sample i of file f starts with token 100 * f + i, so a batch tells which
// samples it holds.
// first_file: the number of the first file (another data set's files can follow another's).
void write_sample_files(const std::string& dir, const std::vector<int>& counts, int first_file = 0) {
  std::string list = std::to_string(first_file) + ":";
  for (int c : counts) list += std::to_string(c) + ",";
  TempDir tmp;
  const std::string script = testing::write_file(tmp / "w.py", zoo::testing::oracle("hdf5_write.py"));
  std::filesystem::create_directories(dir);
  const auto r = testing::run_command("/usr/bin/python3 " + script + " " + dir + " " + list);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

// The samples (first tokens) of the next `batches` batches.
std::vector<int64_t> take(data::DataLoader& loader, int batches) {
  std::vector<int64_t> out;
  for (int b = 0; b < batches; ++b) {
    torch::Tensor first = loader.next().at("input_ids").select(1, 0).contiguous();
    out.insert(out.end(), first.data_ptr<int64_t>(), first.data_ptr<int64_t>() + first.numel());
  }
  return out;
}

std::string replaced_once(std::string s, const std::string& from, const std::string& to) {
  return s.replace(s.find(from), from.size(), to);
}

std::vector<int64_t> range_of(int64_t file, int64_t from, int64_t to) {
  std::vector<int64_t> v;
  for (int64_t i = from; i < to; ++i) v.push_back(100 * file + i);
  return v;
}

}  // namespace

TEST(Hdf5Iterable, ReadsFilesInOrderAndShufflesFilesAndSamplesBySeed) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  write_sample_files(dir.path(), {5, 7, 6});
  const std::string base = "{data_processor: GptHDF5DataProcessor, data_dir: " + dir.path() + ", batch_size: 4";
  auto plain = open_loader(base + "}");
  EXPECT_EQ(plain->batches_per_epoch(), 4);
  // Epoch 0: the files in sorted order, 16 of the 18 samples (drop_last); epoch 1 starts over.
  std::vector<int64_t> want = range_of(0, 0, 5), f1 = range_of(1, 0, 7), f2 = range_of(2, 0, 4),
                       again = range_of(0, 0, 4);
  want.insert(want.end(), f1.begin(), f1.end());
  want.insert(want.end(), f2.begin(), f2.end());
  want.insert(want.end(), again.begin(), again.end());
  EXPECT_EQ(take(*plain, 5), want);

  auto shuffled = open_loader(base + ", shuffle: true, shuffle_seed: 9, shuffle_buffer: 6}");
  const auto epoch0 = take(*shuffled, 4), epoch1 = take(*shuffled, 4);
  for (const auto& epoch : {epoch0, epoch1}) {
    std::set<int64_t> distinct(epoch.begin(), epoch.end());
    EXPECT_EQ(distinct.size(), 16u);  // no sample twice within an epoch
    for (int64_t id : epoch) EXPECT_TRUE((id < 5) || (id >= 100 && id < 107) || (id >= 200 && id < 206)) << id;
  }
  EXPECT_NE(epoch0, std::vector<int64_t>(want.begin(), want.begin() + 16));
  EXPECT_NE(epoch0, epoch1);
  EXPECT_EQ(take(*open_loader(base + ", shuffle: true, shuffle_seed: 9, shuffle_buffer: 6}"), 8), [&] {
    auto v = epoch0;
    v.insert(v.end(), epoch1.begin(), epoch1.end());
    return v;
  }());
  EXPECT_NE(take(*open_loader(base + ", shuffle: true, shuffle_seed: 10, shuffle_buffer: 6}"), 4), epoch0);
  // A buffer of one sample shuffles only the file order: each file's samples stay in order.
  const auto files_only = take(*open_loader(base + ", shuffle: true, shuffle_seed: 9, shuffle_buffer: 1}"), 4);
  for (size_t i = 1; i < files_only.size(); ++i)
    if (files_only[i] / 100 == files_only[i - 1] / 100) EXPECT_EQ(files_only[i], files_only[i - 1] + 1);
  std::set<int64_t> first_files;  // the file order does change with the seed
  for (int seed = 0; seed < 8; ++seed)
    first_files.insert(
        take(*open_loader(base + ", shuffle: true, shuffle_buffer: 1, shuffle_seed: " + std::to_string(seed) + "}"),
             1)[0] /
        100);
  EXPECT_GE(first_files.size(), 2u);
}

TEST(Hdf5Iterable, DataParallelTasksReadDisjointFileShards) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  write_sample_files(dir.path(), {4, 4, 4});
  // batch_size is the global batch: 2 samples per task.
  const std::string yaml = "{data_processor: GptHDF5DataProcessor, data_dir: " + dir.path() + ", batch_size: 4}";
  std::vector<int64_t> task0, task1;
  {
    EnvGuard env{{"RANK", "0"}, {"WORLD_SIZE", "2"}};
    auto loader = open_loader(yaml);
    EXPECT_EQ(loader->position().num_tasks, 2);
    task0 = take(*loader, 4);
    // Each task's files are its own: the position means nothing at another world size.
    const auto position = loader->position();
    EnvGuard one{{"WORLD_SIZE", "1"}};
    try {
      open_loader(yaml)->resume(position);
      ADD_FAILURE() << "no error for resuming 2 tasks' position in 1";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(
          std::string(e.what()).find("split across 2 task(s), this run has 1 and this processor shards whole files"),
          std::string::npos)
          << e.what();
    }
  }
  {
    EnvGuard env{{"RANK", "1"}, {"WORLD_SIZE", "2"}};
    task1 = take(*open_loader(yaml), 2);
  }
  std::vector<int64_t> want0 = range_of(0, 0, 4);  // files[0::2]
  for (int64_t sample : range_of(2, 0, 4))
    want0.push_back(sample);  // (insert: a GCC 12 -Wstringop-overflow false positive)
  EXPECT_EQ(task0, want0);
  EXPECT_EQ(task1, range_of(1, 0, 4));  // files[1::2]
  EnvGuard env{{"RANK", "3"}, {"WORLD_SIZE", "4"}};
  const std::string e = open_error(yaml);
  EXPECT_NE(e.find("3 *.h5 file(s) for 4 data-parallel tasks (WORLD_SIZE): task 3 gets none"), std::string::npos) << e;
}

// modelzoo's `mixture` (Jais): weights 0.75 / 0.25 over data sets of 10 and
// 6 samples make an epoch of 24, 18 from the first (each sample once, the
// first 8 twice) and 6 from the second (each once). Shuffled, the epoch is a
// permutation of that; unshuffled, the sets interleave with each set's
// samples in their own order.
TEST(Hdf5Map, MixtureTakesEachSetsShareOfAnEpoch) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  write_sample_files(dir / "a", {10});
  write_sample_files(dir / "b", {6}, 1);  // first tokens 100..105
  const std::string base =
      "{data_processor: GptHDF5MapDataProcessor, batch_size: 4, mixture: [{data_dir: " + (dir / "a") +
      ", weight: 0.75}, {data_dir: " + (dir / "b") + ", weight: 0.25}, " + "{data_dir: " + (dir / "a") +
      ", weight: 0}]";
  std::vector<int64_t> expected;
  for (int64_t i = 0; i < 18; ++i) expected.push_back(i % 10);
  for (int64_t i = 0; i < 6; ++i) expected.push_back(100 + i);
  std::vector<int64_t> expected_sorted = expected;
  std::sort(expected_sorted.begin(), expected_sorted.end());
  for (const bool shuffle : {true, false}) {
    auto loader = open_loader(base + ", shuffle: " + (shuffle ? "true" : "false") + ", shuffle_seed: 3}");
    std::vector<int64_t> epoch = take(*loader, 6);
    std::vector<int64_t> sorted = epoch;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, expected_sorted) << (shuffle ? "shuffled" : "interleaved");
    if (shuffle) continue;
    std::vector<int64_t> a, b;
    for (int64_t t : epoch) (t < 100 ? a : b).push_back(t);
    EXPECT_EQ(b, range_of(1, 0, 6)) << "the second set's samples keep their order";
    std::vector<int64_t> in_order(expected.begin(), expected.begin() + 18);
    EXPECT_EQ(a, in_order);
    EXPECT_NE(epoch, expected) << "interleaved, not one set after the other";
  }
  EXPECT_NE(open_error("{data_processor: GptHDF5MapDataProcessor, batch_size: 4, data_dir: " + (dir / "a") +
                       ", mixture: [{data_dir: " + (dir / "b") + ", weight: 1}]}")
                .find("give data_dir or mixture, not both"),
            std::string::npos);
  EXPECT_NE(open_error(base + ", shuffle: false}").find("no error"), std::string::npos);
}

// modelzoo's data_subset: "0.0-0.3,0.5-0.7" of 10 samples keeps samples 0-2
// and 5-6, in order; a mixture's item reads its own part; bad ranges, and the
// key where modelzoo would not read it, are named.
TEST(Hdf5Map, DataSubsetKeepsItsRanges) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  write_sample_files(dir / "a", {10});
  const std::string base = "{data_processor: GptHDF5MapDataProcessor, shuffle: false, ";
  auto loader = open_loader(base + "batch_size: 5, data_dir: " + (dir / "a") + ", data_subset: '0.0-0.3,0.5-0.7'}");
  EXPECT_EQ(loader->batches_per_epoch(), 1);
  EXPECT_EQ(take(*loader, 2), (std::vector<int64_t>{0, 1, 2, 5, 6, 0, 1, 2, 5, 6}));
  loader =
      open_loader(base + "batch_size: 2, mixture: [{data_dir: " + (dir / "a") + ", weight: 1, data_subset: 0.8-1.0}]}");
  EXPECT_EQ(take(*loader, 1), (std::vector<int64_t>{8, 9}));
  auto error = [&](const std::string& section) {
    const std::string e = open_error(base + "batch_size: 2, " + section + "}");
    return e.substr(e.find("train_input"));
  };
  const std::string a = "data_dir: " + (dir / "a");
  EXPECT_EQ(error(a + ", data_subset: 0.5-0.2").rfind("train_input.data_subset: range 0.5-0.2 is not within [0, 1]", 0),
            0u)
      << error(a + ", data_subset: 0.5-0.2");
  EXPECT_NE(error(a + ", data_subset: '0.1-0.5,0.4-0.9'").find("starts before the previous range ends"),
            std::string::npos);
  EXPECT_NE(error(a + ", data_subset: half").find("not comma-separated ranges"), std::string::npos);
  EXPECT_NE(error(a + ", data_subset: 0.0-0.05").find("keeps none of the 10 samples"), std::string::npos)
      << error(a + ", data_subset: 0.0-0.05");
  EXPECT_NE(error("mixture: [{data_dir: " + (dir / "a") + ", weight: 1, data_subset: 0.9-0.1}]").find("data_subset"),
            std::string::npos);
  const std::string iterable =
      open_error("{data_processor: GptHDF5DataProcessor, batch_size: 2, " + a + ", data_subset: 0.0-0.5}");
  EXPECT_NE(iterable.find("train_input.data_subset: applies to GptHDF5MapDataProcessor only"), std::string::npos)
      << iterable;
}

TEST(Hdf5Map, DataParallelTasksTakeAlternateBatches) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  write_sample_files(dir.path(), {6, 6});
  const std::string yaml = "{data_processor: GptHDF5MapDataProcessor, data_dir: " + dir.path() +
                           ", batch_size: 2, shuffle: true, shuffle_seed: 4}";
  const auto single = take(*open_loader(yaml), 8);
  // Two tasks with a global batch of 4: each takes its half of every batch of 4.
  const std::string global4 = replaced_once(yaml, "batch_size: 2", "batch_size: 4");
  std::vector<int64_t> t0, t1;
  {
    EnvGuard env{{"RANK", "0"}, {"WORLD_SIZE", "2"}};
    t0 = take(*open_loader(global4), 4);
  }
  {
    EnvGuard env{{"RANK", "1"}, {"WORLD_SIZE", "2"}};
    t1 = take(*open_loader(global4), 4);
  }
  for (int b = 0; b < 4; ++b)
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(t0[2 * b + i], single[4 * b + i]);
      EXPECT_EQ(t1[2 * b + i], single[4 * b + 2 + i]);
    }
}

// modelzoo's add_sink_tokens transform (its long-context Llama 3.1 and
// Gemma 2 configs): sink tokens inserted in input_ids and labels with no
// loss on them, the rest of the sample as read; cut back with
// truncate_to_original_length; refused for the iterable processor.
TEST(Hdf5Map, AddSinkTokensInsertsSinksWithoutLoss) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  write_sample_files(dir.path(), {4});
  const std::string base = "{data_processor: GptHDF5MapDataProcessor, data_dir: " + dir.path() + ", batch_size: 2";
  const data::Features plain = open_loader(base + "}")->next();
  auto loader = open_loader(base +
                            ", data_transforms: [{name: add_sink_tokens, sink_token_id: 7, num_sink_tokens: 3, "
                            "sink_token_start_pos: 1}]}");
  EXPECT_EQ(loader->sequence_length(), 11);
  const data::Features f = loader->next();
  using torch::indexing::None;
  using torch::indexing::Slice;
  for (const char* name : {"input_ids", "labels", "attention_mask"}) {
    const torch::Tensor t = f.at(name), p = plain.at(name);
    ASSERT_EQ(t.size(1), 11) << name;
    EXPECT_TRUE(torch::equal(t.index({Slice(), Slice(0, 1)}), p.index({Slice(), Slice(0, 1)}))) << name;
    EXPECT_TRUE(torch::equal(t.index({Slice(), Slice(4, None)}), p.index({Slice(), Slice(1, None)}))) << name;
    const int64_t fill = std::string(name) == "attention_mask" ? 0 : 7;
    EXPECT_TRUE((t.index({Slice(), Slice(1, 4)}) == fill).all().item<bool>()) << name;
  }
  auto cut = open_loader(base +
                         ", data_transforms: [{name: add_sink_tokens, num_sink_tokens: 3, "
                         "truncate_to_original_length: true}]}");
  EXPECT_EQ(cut->next().at("input_ids").size(1), 8);
  EXPECT_NE(testing::open_error("{data_processor: GptHDF5DataProcessor, data_dir: " + dir.path() +
                                ", batch_size: 2, data_transforms: [{name: add_sink_tokens}]}")
                .find("data_transforms: applies to GptHDF5MapDataProcessor only"),
            std::string::npos);
  EXPECT_NE(testing::open_error(base + ", data_transforms: [{name: add_memory_tokens}]}").find("add_memory_tokens"),
            std::string::npos);
}

// Stop after k batches, resume a fresh loader from the saved position, and the
// remaining batches equal an uninterrupted run: both processors, shuffled or
// not, read inline or by background workers.
TEST(Hdf5Resume, BothProcessorsResumeExactlyShuffledOrNot) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  write_sample_files(dir.path(), {5, 7, 6});
  for (const char* processor : {"GptHDF5DataProcessor", "GptHDF5MapDataProcessor"})
    for (const char* order : {"", ", shuffle: true, shuffle_seed: 3"})
      for (const char* workers : {"", ", num_workers: 2, prefetch_factor: 3"}) {
        SCOPED_TRACE(std::string(processor) + order + workers);
        const std::string yaml = std::string("{data_processor: ") + processor + ", data_dir: " + dir.path() +
                                 ", batch_size: 4" + order + workers + "}";
        const auto whole = take(*open_loader(yaml), 14);  // over three epochs
        for (int k : {1, 5, 9}) {
          auto first = open_loader(yaml);
          const auto head = take(*first, k);
          EXPECT_EQ(head, std::vector<int64_t>(whole.begin(), whole.begin() + 4 * k));
          const data::DataLoader::Position saved = first->position();
          EXPECT_EQ(saved.samples_streamed, 4 * k);
          auto resumed = open_loader(yaml);
          resumed->resume(saved);
          EXPECT_EQ(take(*resumed, 14 - k), std::vector<int64_t>(whole.begin() + 4 * k, whole.end())) << "k=" << k;
        }
        // Workers change nothing about the order.
        const std::string inline_yaml = std::string("{data_processor: ") + processor + ", data_dir: " + dir.path() +
                                        ", batch_size: 4" + order + "}";
        EXPECT_EQ(whole, take(*open_loader(inline_yaml), 14));
      }
}

// Each bad-data case names the file and the problem.
TEST(Hdf5BadData, EachCaseNamesTheFileAndTheProblem) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  const std::string script = testing::write_file(dir / "bad.py", zoo::testing::oracle("hdf5_bad.py"));
  ASSERT_EQ(testing::run_command("/usr/bin/python3 " + script + " " + dir.path()).exit_code, 0);
  auto error = [&](const std::string& sub, const std::string& extra = "") {
    return open_error("{data_processor: GptHDF5DataProcessor, batch_size: 2, data_dir: " + (dir / sub) + extra + "}");
  };
  auto expect = [&](const std::string& sub, const std::string& problem, const std::string& extra = "") {
    const std::string e = error(sub, extra);
    EXPECT_NE(e.find("train_input.data_dir"), std::string::npos) << e;
    EXPECT_NE(e.find(problem), std::string::npos) << e;
  };
  const auto file = [&](const std::string& sub) { return (dir / sub) + "/examples_0.h5: "; };
  expect("missing", file("missing") + "no dataset 'data'");
  expect("float", file("float") + "dataset 'data' holds floating-point numbers, expected int32 token ids");
  expect("rows", file("rows") + "dataset 'data' has shape (2, 2, 8), expected (n, 3, msl)");
  expect("rank", file("rank") + "dataset 'data' has shape (2, 3, 8, 1)");
  expect("msl", file("msl") + "sequence length 8 differs from max_sequence_length 16", ", max_sequence_length: 16");
  expect("notsdf", file("notsdf") + "not a readable HDF5 file");
  expect("unwritten", file("unwritten") + "dataset 'data' has chunks that were never written");
  expect("empty", "no *.h5 files");
  // Token ids >= vocab_size: see Data.ReadsModelzooHdf5Samples.
}

// BERT samples from a token stream 1000, 1001, ...: unmasking a sample must
// give back [CLS] A [SEP] B [SEP] where A starts a window and B either
// continues it (label 0) or is a run from another window (label 1).
TEST(BertMlm, SentencePairsAndMasksRebuildTheTokenizedText) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  const std::string script = testing::write_file(dir / "w.py", zoo::testing::oracle("hdf5_write_2.py"));
  ASSERT_EQ(testing::run_command("/usr/bin/python3 " + script + " " + dir.path()).exit_code, 0);
  const std::string base = "{data_processor: BertMlmDataProcessor, data_dir: " + dir.path() +
                           ", batch_size: 8, max_sequence_length: 16, max_predictions_per_seq: 3, vocab_size: 3000, "
                           "shuffle_seed: ";
  auto loader = open_loader(base + "5}");
  EXPECT_EQ(loader->batches_per_epoch(), 76 / 8);  // 999 tokens / 13 per window
  const int64_t CLS = 101, SEP = 102, MASK = 103;
  int64_t labels[2] = {0, 0}, masked = 0, as_mask = 0;
  for (int batch = 0; batch < 9; ++batch) {
    data::Features b = loader->next();
    for (int64_t r = 0; r < 8; ++r) {
      const int64_t window = batch * 8 + r;
      std::vector<int64_t> seq(b.at("input_ids")[r].data_ptr<int64_t>(), b.at("input_ids")[r].data_ptr<int64_t>() + 16);
      const int64_t length = b.at("attention_mask")[r].sum().item<int64_t>();
      EXPECT_EQ(length, 16);  // 13 tokens + 3 specials fill every window
      for (int64_t k = 0; k < 3; ++k) {
        if (!b.at("masked_lm_mask")[r][k].item<int64_t>()) continue;
        const int64_t pos = b.at("masked_lm_positions")[r][k].item<int64_t>();
        ++masked;
        as_mask += seq[pos] == MASK;
        seq[pos] = b.at("labels")[r][k].item<int64_t>();
      }
      EXPECT_EQ(b.at("masked_lm_mask")[r].sum().item<int64_t>(), 2);  // round(0.15 * 13)
      ASSERT_EQ(seq[0], CLS);
      ASSERT_EQ(seq[15], SEP);
      const auto sep = std::find(seq.begin() + 1, seq.end(), SEP) - seq.begin();
      ASSERT_LT(sep, 15);
      for (int64_t t = 1; t < sep; ++t) EXPECT_EQ(seq[t], 1000 + 13 * window + (t - 1));  // A starts the window
      for (int64_t t = sep + 2; t < 15; ++t) EXPECT_EQ(seq[t], seq[t - 1] + 1);           // B is a contiguous run
      const int64_t nsp = b.at("next_sentence_label")[r].item<int64_t>();
      ++labels[nsp];
      EXPECT_EQ(seq[sep + 1] == seq[sep - 1] + 1, nsp == 0) << "window " << window;
      for (int64_t t = 0; t < 16; ++t) EXPECT_EQ(b.at("token_type_ids")[r][t].item<int64_t>(), t > sep ? 1 : 0);
    }
  }
  EXPECT_GT(labels[0], 15);
  EXPECT_GT(labels[1], 15);
  EXPECT_GT(as_mask, masked * 6 / 10);  // 80% [MASK] (the rest random or kept)
  EXPECT_LT(as_mask, masked);
  // Samples are fixed by shuffle_seed and sample: re-reading repeats them, another seed does not.
  auto a = open_loader(base + "5}"), other = open_loader(base + "6}");
  const data::Features first = a->next();
  EXPECT_TRUE(torch::equal(first.at("input_ids"), open_loader(base + "5}")->next().at("input_ids")));
  EXPECT_FALSE(torch::equal(first.at("input_ids"), other->next().at("input_ids")));
  // Without NSP: one segment.
  data::Features single = open_loader(base + "5, disable_nsp: true}")->next();
  EXPECT_EQ(single.at("token_type_ids").sum().item<int64_t>(), 0);
  EXPECT_EQ(single.at("next_sentence_label").sum().item<int64_t>(), 0);
  EXPECT_EQ(single.at("attention_mask")[0].sum().item<int64_t>(), 15);  // [CLS] 13 tokens [SEP]
  EXPECT_NE(open_error(base + "5, mask_id: 3000}").find("mask_id: must be below vocab_size (3000)"), std::string::npos);
}

// zoo reads modelzoo's layout (gzip, one sample per chunk) as stored chunks
// inflated outside HDF5; every other layout goes through HDF5's own reader.
// Both give the same samples.
TEST(Hdf5Layouts, EveryStorageLayoutReadsTheSameSamples) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  const std::string script = testing::write_file(dir / "w.py", zoo::testing::oracle("hdf5_write_3.py"));
  ASSERT_EQ(testing::run_command("/usr/bin/python3 " + script + " " + dir.path()).exit_code, 0);
  auto batches = [&](const std::string& layout, const std::string& extra = "") {
    auto loader = open_loader("{data_processor: GptHDF5MapDataProcessor, batch_size: 6, data_dir: " + (dir / layout) +
                              extra + "}");
    return loader->next();
  };
  const data::Features want = batches("contiguous");
  EXPECT_GT(want.at("input_ids").max().item<int64_t>(), 1000);
  for (const char* layout : {"modelzoo", "plain_chunks", "big_chunks", "shuffled_gzip", "int64"})
    for (const char* workers : {"", ", num_workers: 2"}) {
      const data::Features got = batches(layout, workers);
      for (const char* key : {"input_ids", "attention_mask", "labels"})
        EXPECT_TRUE(torch::equal(got.at(key), want.at(key))) << layout << workers << " " << key;
    }
}

}  // namespace zoo
