// Packed rows as data: modelzoo's 5-row VSL files (written here by h5py as
// its generator lays them out) read with use_vsl and trained with each
// sequence apart; inconsistent rows named by file and sample; `zoo data
// create-hdf5 ... --pack true` rows holding exactly the unpacked samples;
// best-fit decreasing's bins.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <set>

#include "data/packing.h"
#include "models/model.h"
#include "models/registry.h"
#include "tests/decoder_cases.h"
#include "tests/hdf5_fixtures.h"
#include "tests/test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

// The sequences of a packed batch, each alone in a row padded to the same length.
models::Features unpack(const models::Features& packed) {
  const torch::Tensor starts = packed.at("position_ids").eq(0);
  const int64_t B = starts.size(0), T = starts.size(1);
  std::vector<std::pair<int64_t, std::pair<int64_t, int64_t>>> pieces;  // row, [first, end)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T;) {
      int64_t end = t + 1;
      while (end < T && packed.at("position_ids")[b][end].item<int64_t>() != 0) ++end;
      pieces.push_back({b, {t, end}});
      t = end;
    }
  models::Features out;
  for (const char* f : {"input_ids", "labels", "attention_mask"}) {
    torch::Tensor rows = torch::zeros({static_cast<int64_t>(pieces.size()), T}, torch::kLong);
    for (size_t i = 0; i < pieces.size(); ++i) {
      const auto [b, range] = pieces[i];
      rows[static_cast<int64_t>(i)]
          .narrow(0, 0, range.second - range.first)
          .copy_(packed.at(f)[b].narrow(0, range.first, range.second - range.first));
    }
    out[f] = rows;
  }
  return out;
}

}  // namespace

TEST(PackedRows, EachInconsistencyIsNamed) {
  auto problem = [](std::vector<int32_t> span, std::vector<int32_t> positions) {
    return data::packed_row_problem(span.data(), positions.data(), static_cast<int64_t>(span.size()));
  };
  EXPECT_EQ(problem({2, 1, 0, 1, 0, 0}, {0, 1, 2, 0, 1, 0}), "");  // two sequences, then padding
  EXPECT_EQ(problem({2, 1, 0, 2, 1}, {0, 1, 2, 0, 1}), "");        // the shift cut the last token: one past
  EXPECT_NE(problem({1, 0, 4, 3, 2}, {0, 1, 0, 1, 2}).find("attention_span 4 at column 2 runs past the row's 5"),
            std::string::npos);
  EXPECT_NE(problem({1, 0, 1, 0}, {0, 1, 2, 3}).find("position_ids 2 at column 2 does not restart at 0"),
            std::string::npos);
  EXPECT_NE(problem({2, 0, 0, 0}, {0, 1, 0, 0}).find("do not continue the sequence of column 0"), std::string::npos);
  EXPECT_NE(problem({0, -1}, {0, 0}).find("expected values >= 0"), std::string::npos);
  EXPECT_NE(problem({0, 0}, {1, 0}).find("position_ids 1 at column 0 does not restart"), std::string::npos);
}

// Rows read from files are untrusted: mangled ones are refused, and every
// row accepted numbers each token within its own sequence, which starts at
// or before it (what the attention kernels index by).
TEST(PackedRows, MangledRowsAreRefusedOrDescribeSequencesInTheRow) {
  std::mt19937 gen(17);
  const int64_t T = 24;
  int accepted = 0, refused = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<int32_t> span(T, 0), positions(T, 0);
    for (int64_t t = 0; t < T;) {  // a valid row: sequences of 1 .. 8, the last maybe cut by one
      const int64_t L = std::min<int64_t>(1 + gen() % 8, T - t);
      for (int64_t j = 0; j < L; ++j)
        span[t + j] = static_cast<int32_t>(L - 1 - j), positions[t + j] = static_cast<int32_t>(j);
      t += L;
    }
    if (gen() % 4 == 0) span[T - 1] += 1;  // modelzoo's shift cut the last sequence
    const int mutations = static_cast<int>(gen() % 4);
    const int32_t values[] = {-1, 0, 1, 2, 7, T - 1, T, T + 1, 1 << 30, -(1 << 30)};
    for (int m = 0; m < mutations; ++m) {
      auto& row = gen() % 2 ? span : positions;
      row[gen() % T] = gen() % 2 ? values[gen() % 10] : row[gen() % T];
    }
    if (!data::packed_row_problem(span.data(), positions.data(), T).empty()) {
      ++refused;
      continue;
    }
    ++accepted;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t start = t - positions[t];
      ASSERT_GE(start, 0);
      ASSERT_LE(start, t);
      if (t > 0) ASSERT_GE(start, (t - 1) - positions[t - 1]) << "sequences follow one another";
    }
  }
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(refused, 1000);
}

TEST(PackedRows, BestFitDecreasingPlacesEveryItemOnceWithinCapacity) {
  std::mt19937 gen(3);
  std::vector<int64_t> sizes;
  for (int i = 0; i < 5000; ++i)
    sizes.push_back(1 + static_cast<int64_t>(std::lognormal_distribution<>(5.3, 0.8)(gen)) % 2048);
  const auto bins = data::best_fit_decreasing(sizes, 2048);
  std::vector<int> seen(sizes.size(), 0);
  int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  for (const auto& bin : bins) {
    int64_t used = 0;
    for (size_t i : bin) used += sizes[i], ++seen[i];
    EXPECT_LE(used, 2048);
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(sizes.size()));
  const int64_t lower_bound = (total + 2047) / 2048;
  EXPECT_LE(static_cast<int64_t>(bins.size()), lower_bound + lower_bound / 50 + 1) << "within 2% of the bound";
  EXPECT_EQ(data::best_fit_decreasing(sizes, 2048), bins) << "deterministic";
  EXPECT_EQ(data::best_fit_decreasing({6, 5, 4, 3, 2}, 10), (std::vector<std::vector<size_t>>{{0, 2}, {1, 3, 4}}));
  EXPECT_THROW(data::best_fit_decreasing({11}, 10), std::invalid_argument);
}

// Done-when 2: modelzoo's layout read with use_vsl hands the model
// attention_span and position_ids, and a training step on it is the step on
// each sequence alone; without use_vsl (or with it on 3-row files) and on
// inconsistent rows the error names the file, the sample and the key.
TEST(PackedRows, AModelzooVslFileTrainsEachSequenceApart) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  const std::string script = zoo::testing::write_file(dir / "w.py", zoo::testing::oracle("packing_write_vsl.py"));
  const auto w = zoo::testing::run_command("/usr/bin/python3 " + script + " " + dir.path());
  ASSERT_EQ(w.exit_code, 0) << w.output;
  auto input = [&](const std::string& sub, const std::string& extra) {
    return "{data_processor: GptHDF5MapDataProcessor, batch_size: 4, data_dir: " + (dir / sub) + extra + "}";
  };
  const models::Features batch = zoo::testing::open_loader(input("vsl", ", use_vsl: true"))->next();
  ASSERT_TRUE(batch.count("attention_span") && batch.count("position_ids"));
  EXPECT_TRUE(torch::equal(batch.at("position_ids")[0], torch::tensor({0, 1, 2, 3, 0, 1, 2, 3, 4, 0, 1, 2})));
  EXPECT_TRUE(torch::equal(batch.at("attention_span")[2], torch::tensor({6, 5, 4, 3, 2, 1, 0, 5, 4, 3, 2, 1})));

  const Params params = zoo::testing::decoder_params(zoo::testing::kDecoderCases[1].model, 61, 12, 4);
  torch::manual_seed(2);
  const auto model = params.model->build(torch::TensorOptions());
  auto step = [&](const models::Features& f) {
    model->zero_grad();
    const torch::Tensor loss = model->forward(f, false).loss;
    loss.backward();
    std::vector<torch::Tensor> g;
    for (const auto& p : model->parameters()) g.push_back(p.grad().clone());
    return std::make_pair(loss.item<double>(), g);
  };
  const auto packed = step(batch), apart = step(unpack(batch));
  EXPECT_NEAR(packed.first, apart.first, 1e-5);
  for (size_t i = 0; i < packed.second.size(); ++i)
    EXPECT_LT((packed.second[i] - apart.second[i]).abs().max().item<double>(), 1e-5);
  models::Features unaware = batch;
  unaware.erase("position_ids");
  EXPECT_GT(std::abs(step(unaware).first - apart.first), 1e-4) << "attending across the sequences changes the loss";

  const std::string file = (dir / "vsl") + "/examples_0.h5";
  const std::string without = zoo::testing::open_error(input("vsl", ""));
  EXPECT_NE(without.find(file), std::string::npos) << without;
  EXPECT_NE(without.find("set use_vsl: true"), std::string::npos) << without;
  const std::string three = zoo::testing::open_error(input("three_rows", ", use_vsl: true"));
  EXPECT_NE(three.find((dir / "three_rows") + "/examples_0.h5"), std::string::npos) << three;
  EXPECT_NE(three.find("use_vsl: true expects (n, 5, msl)"), std::string::npos) << three;
  const std::string past = zoo::testing::first_batch_error(input("span_past_row", ", use_vsl: true"));
  EXPECT_NE(past.find((dir / "span_past_row") + "/examples_0.h5, sample 2: attention_span 2 at column 11 runs past"),
            std::string::npos)
      << past;
  const std::string restart = zoo::testing::first_batch_error(input("no_restart", ", use_vsl: true"));
  EXPECT_NE(
      restart.find((dir / "no_restart") + "/examples_0.h5, sample 1: position_ids 3 at column 6 does not restart"),
      std::string::npos)
      << restart;

  // A model that cannot keep packed sequences apart is refused before anything runs.
  const std::string refused = zoo::testing::params_error(
      "train_input: " + input("vsl", ", use_vsl: true") +
      "\n"
      "model: {name: layers_api_demo, embedding_size: 16, seq_len: 12, vocab_size: 61, num_heads: 2, hidden_size: 16, "
      "num_hidden_layers: 1, dropout: 0.0, nonlinearity: gelu}\n"
      "optimizer: {optimizer_type: SGD, learning_rate: 0.1}\nrunconfig: {max_steps: 1}\n");
  EXPECT_NE(refused.find("cannot keep them apart"), std::string::npos) << refused;
  EXPECT_NE(refused.find("use_vsl"), std::string::npos) << refused;

  // And the runner trains on it.
  zoo::testing::write_file(dir / "p.yaml", "train_input: " + input("vsl", ", use_vsl: true, shuffle: false") +
                                               "\nmodel:\n" + zoo::testing::kDecoderCases[1].model +
                                               "optimizer: {optimizer_type: AdamW, learning_rate: 0.01}\n"
                                               "runconfig: {max_steps: 4, checkpoint_steps: 0, model_dir: " +
                                               (dir / "run") + "}\n");
  const auto run = zoo::testing::run_in_process({"CPU", "--params", dir / "p.yaml", "--mode", "train"});
  EXPECT_EQ(run.code, 0) << run.error;
}

// `create-hdf5 Summarization --pack true`: rows in modelzoo's 5-row layout
// holding exactly the samples the unpacked run writes one per row, fewer
// rows, and the run's summary of how full they are; they train with use_vsl.
TEST(PackedRows, CreateHdf5PacksTheSamplesItWouldWriteOnePerRow) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  std::mt19937 gen(5);
  std::string lines;
  for (int i = 0; i < 60; ++i) {
    const int prompt = 3 + static_cast<int>(gen() % 40), completion = 1 + static_cast<int>(gen() % 25);
    lines += nlohmann::json{{"prompt", std::string(prompt, static_cast<char>('a' + i % 26))},
                            {"completion", std::string(completion, static_cast<char>('A' + i % 26))}}
                 .dump() +
             "\n";
  }
  lines += nlohmann::json{{"prompt", std::string(80, 'z')}, {"completion", "too long"}}.dump() + "\n";
  zoo::testing::write_file(dir / "in/pairs.jsonl", lines);
  auto create = [&](const std::string& out, const std::string& extra) {
    return zoo::testing::run_command(zoo::testing::zoo_binary() + " data create-hdf5 Summarization --input_dir " +
                                     (dir / "in") + " --output_dir " + (dir / out) +
                                     " --tokenizer_type ByteTokenizer --eos_id 0 " + "--max_seq_length 64 " + extra);
  };
  const auto unpacked = create("one", ""), packed = create("packed", "--pack true");
  ASSERT_EQ(unpacked.exit_code, 0) << unpacked.output;
  ASSERT_EQ(packed.exit_code, 0) << packed.output;
  EXPECT_NE(packed.output.find("Packed 60 sequences into "), std::string::npos) << packed.output;
  EXPECT_NE(packed.output.find("0 truncated, 1 dropped"), std::string::npos) << packed.output;

  // Every unpacked sample, cut to its length, is one packed sequence.
  const nlohmann::json rows = zoo::testing::h5py_dump(dir / "packed")["examples_0.h5"];
  EXPECT_EQ(rows["shape"], nlohmann::json({rows["data"].size(), 5, 64}));
  std::multiset<std::vector<int32_t>> from_packed, from_unpacked;
  for (const auto& row : rows["data"]) {
    std::vector<int32_t> span = row[3].get<std::vector<int32_t>>(), positions = row[4].get<std::vector<int32_t>>();
    EXPECT_EQ(data::packed_row_problem(span.data(), positions.data(), 64), "");
    int filled = 0;  // the columns up to the last sequence's end; padding after (every sequence spans >= 2)
    for (int t = 0; t < 64; ++t)
      if (positions[t] != 0) filled = t + 1;
    for (int t = 0; t < filled;) {
      const int n = span[t] + 1;
      std::vector<int32_t> s;
      for (int r = 0; r < 3; ++r)
        for (int j = 0; j < n; ++j) s.push_back(row[r][t + j]);
      from_packed.insert(s);
      t += n;
    }
  }
  for (const auto& sample : zoo::testing::h5py_samples(dir / "one")) {
    int n = 64;
    while (n > 0 && sample[64 + n - 1] == 0 && sample[n - 1] == 0 && sample[128 + n - 1] == 0) --n;  // pad id 0
    std::vector<int32_t> s;
    for (int r = 0; r < 3; ++r) s.insert(s.end(), sample.begin() + r * 64, sample.begin() + r * 64 + n);
    from_unpacked.insert(s);
  }
  EXPECT_EQ(from_packed.size(), 60u);
  EXPECT_EQ(from_packed, from_unpacked);
  size_t columns = 0;
  for (const auto& s : from_packed) columns += s.size() / 3;
  const size_t bound = (columns + 63) / 64;  // rows if every column were filled
  EXPECT_LE(rows["data"].size(), bound + bound / 10 + 1) << "within 10% of the bound";
  EXPECT_LT(rows["data"].size(), 60u * 2 / 3);
  const nlohmann::json params = nlohmann::json::parse(zoo::testing::read_file(dir / "packed/data_params.json"));
  EXPECT_EQ(params["processing"]["use_vsl"], true);
  EXPECT_EQ(params["post-process"]["n_sequences"], 60);
  EXPECT_NEAR(params["post-process"]["vsl_packing_factor"].get<double>(), 60.0 / double(rows["data"].size()), 0.006);

  zoo::testing::write_file(
      dir / "p.yaml",
      "train_input: {data_processor: GptHDF5MapDataProcessor, batch_size: 2, use_vsl: true, "
      "data_dir: " +
          (dir / "packed") +
          "}\n"
          "model: {name: gpt2, vocab_size: 256, hidden_size: 32, num_hidden_layers: 1, num_heads: 2, "
          "filter_size: 64, max_position_embeddings: 64, dropout_rate: 0.0}\n"
          "optimizer: {optimizer_type: AdamW, learning_rate: 0.01}\n"
          "runconfig: {max_steps: 3, checkpoint_steps: 0, model_dir: " +
          (dir / "run") + "}\n");
  const auto run = zoo::testing::run_in_process({"CPU", "--params", dir / "p.yaml", "--mode", "train"});
  EXPECT_EQ(run.code, 0) << run.error;
}
