// BERT extractive question answering (zoo's bert/qa, modelzoo's bert
// fine_tuning/qa, Hugging Face's BertForQuestionAnswering): converted from a
// Hugging Face checkpoint its start and end scores equal a float64 reference
// forward written from the published math, the export gives the checkpoint
// back bit for bit, and it fine-tunes on modelzoo's write_csv_qa.py CSV with
// the loss Hugging Face computes (the mean of the start's and the end's
// cross-entropy).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "convert_fixtures.h"
#include "models/bert/qa.h"
#include "runner/convert/convert.h"
#include "runner/convert/safetensors.h"

using namespace zoo;
using zoo::testing::read_raw;
using zoo::testing::TempDir;

namespace {

// modelzoo's write_csv_qa.py layout: meta.dat and a CSV of features, the lists as Python writes them.
void write_qa_csv(const std::string& dir, const torch::Tensor& ids, const torch::Tensor& mask,
                  const torch::Tensor& types, const std::vector<std::pair<int64_t, int64_t>>& spans) {
  std::filesystem::create_directories(dir);
  auto list = [](const torch::Tensor& row) {
    std::string s = "\"[";
    for (int64_t i = 0; i < row.size(0); ++i) s += (i ? ", " : "") + std::to_string(row[i].item<int64_t>());
    return s + "]\"";
  };
  std::string csv =
      "unique_id,example_index,doc_span_index,tokens,token_to_orig_map,token_is_max_context,input_ids,input_mask,"
      "segment_ids,start_position,end_position,is_impossible\n";
  for (size_t b = 0; b < spans.size(); ++b) {
    const int64_t r = static_cast<int64_t>(b) % ids.size(0);
    csv += std::to_string(1000 + b) + "," + std::to_string(b) + ",0,\"['[CLS]']\",{},{}," + list(ids[r]) + "," +
           list(mask[r]) + "," + list(types[r]) + "," + std::to_string(spans[b].first) + "," +
           std::to_string(spans[b].second) + ",False\n";
  }
  zoo::testing::write_file(dir + "/train-0001.csv", csv);
  zoo::testing::write_file(dir + "/meta.dat", "train-0001.csv " + std::to_string(spans.size()) + "\n");
}

}  // namespace

TEST(BertQa, ConvertedScoresMatchAFloat64ReferenceTheLossIsHuggingFacesAndItRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  TempDir dir;
  zoo::testing::run_fixture(dir, "bert.py", zoo::testing::oracle("bert_convert_make_bert.py"), "qa");
  if (::testing::Test::HasFatalFailure()) return;
  convert::run_convert({dir / "hf", "", "hf", "zoo", std::nullopt, dir / "zoo"});  // picked by architectures
  const YAML::Node params = YAML::LoadFile(dir / "zoo/params.yaml");
  EXPECT_EQ(params["model"]["name"].as<std::string>(), "bert/qa");
  EXPECT_EQ(params["train_input"]["data_processor"].as<std::string>(), "BertQADataProcessor");
  auto model = std::dynamic_pointer_cast<models::BertQaModel>(zoo::testing::load_converted(dir));
  ASSERT_TRUE(model);
  const torch::Tensor ids = read_raw(dir / "ids.bin", torch::kLong, {2, 12}),
                      types = read_raw(dir / "types.bin", torch::kLong, {2, 12}),
                      mask = read_raw(dir / "mask.bin", torch::kLong, {2, 12});
  const torch::Tensor expected = read_raw(dir / "mlm.bin", torch::kDouble, {2, 12, 2});
  {
    torch::NoGradGuard no_grad;
    const auto [start, end] = model->span_logits(ids, mask, types);
    const torch::Tensor real = mask.to(torch::kBool);  // padding's scores: HF adds -1e9, zoo hides the key
    EXPECT_LT(((start.to(torch::kDouble) - expected.select(-1, 0)) * real).abs().max().item<double>(), 1e-5);
    EXPECT_LT(((end.to(torch::kDouble) - expected.select(-1, 1)) * real).abs().max().item<double>(), 1e-5);
    // Hugging Face's loss from the reference scores, -log softmax at the answer's start and end averaged, on row 0
    // (no padding).
    models::Features batch = {{"input_ids", ids.narrow(0, 0, 1)},
                              {"attention_mask", mask.narrow(0, 0, 1)},
                              {"token_type_ids", types.narrow(0, 0, 1)},
                              {"labels", torch::tensor({{3L, 5L}})}};
    model->eval();
    const double loss = model->forward(batch, false).loss.item<double>();
    double z_start = 0, z_end = 0;
    for (int64_t t = 0; t < 12; ++t) {
      z_start += std::exp(expected[0][t][0].item<double>());
      z_end += std::exp(expected[0][t][1].item<double>());
    }
    const double reference = ((std::log(z_start) - expected[0][3][0].item<double>()) +
                              (std::log(z_end) - expected[0][5][1].item<double>())) /
                             2;
    EXPECT_NEAR(loss, reference, 1e-5);
    // An answer end past the sequence (SQuAD's clipped spans) is left out of the end's mean, as HF clamps and
    // ignores it.
    const torch::Tensor two = torch::cat({ids.narrow(0, 0, 1), ids.narrow(0, 0, 1)});
    batch = {{"input_ids", two},
             {"attention_mask", torch::ones_like(two)},
             {"token_type_ids", torch::cat({types.narrow(0, 0, 1), types.narrow(0, 0, 1)})},
             {"labels", torch::tensor({{3L, 5L}, {2L, 40L}})}};
    const double start_mean = ((std::log(z_start) - expected[0][3][0].item<double>()) +
                               (std::log(z_start) - expected[0][2][0].item<double>())) /
                              2;
    EXPECT_NEAR(model->forward(batch, false).loss.item<double>(),
                (start_mean + std::log(z_end) - expected[0][5][1].item<double>()) / 2, 1e-5);
  }

  // The export: the same tensors, BertForQuestionAnswering, found again by architectures.
  convert::run_convert({dir / "zoo/checkpoint_0.mdl", "", "zoo", "hf", std::nullopt, dir / "back"});
  zoo::testing::expect_exported_bit_for_bit(dir / "hf/model.safetensors", dir / "back/model.safetensors",
                                            {"bert.embeddings.position_ids"});
  const auto config = nlohmann::json::parse(zoo::testing::read_file(dir / "back/config.json"));
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"BertForQuestionAnswering"}));
  EXPECT_EQ(models::hf_converter_for(config), "bert-qa");

  // Fine-tuning on modelzoo's SQuAD CSV: the converted params with the data there train and evaluate.
  write_qa_csv(dir / "data/train", ids, mask, types, {{3, 5}, {1, 1}, {2, 7}, {0, 0}});
  write_qa_csv(dir / "data/val", ids, mask, types, {{3, 5}, {1, 1}});
  YAML::Node p = YAML::LoadFile(dir / "zoo/params.yaml");
  for (const char* s : {"train_input", "eval_input"}) {
    p[s]["data_dir"] = std::string(dir / "data") + (std::string(s) == "train_input" ? "/train" : "/val");
    p[s]["max_sequence_length"] = 12;
    p[s]["batch_size"] = 2;
  }
  p["runconfig"]["num_steps"] = 3;
  p["runconfig"]["checkpoint_steps"] = 3;
  p["runconfig"]["eval_frequency"] = 3;
  p["runconfig"]["log_steps"] = 1;
  p["runconfig"]["model_dir"] = std::string(dir / "ft");
  YAML::Emitter e;
  e << p;
  const std::string ft = zoo::testing::write_file(dir / "ft.yaml", e.c_str());
  auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + ft + " --mode train_and_eval");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("exact_match[^0-9]*([0-9.]+)"))) << r.output;
  const double em = std::stod(m[1]);
  EXPECT_GE(em, 0.0);
  EXPECT_LE(em, 1.0);

  // A row whose lists are not max_sequence_length long is named.
  p["train_input"]["max_sequence_length"] = 10;
  p["runconfig"]["model_dir"] = std::string(dir / "ft_bad");
  YAML::Emitter bad;
  bad << p;
  r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " +
                                zoo::testing::write_file(dir / "bad.yaml", bad.c_str()) + " --mode train");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("train-0001.csv, row 1: input_ids has 12 values where max_sequence_length is 10"),
            std::string::npos)
      << r.output;
}
