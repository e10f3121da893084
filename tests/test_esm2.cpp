// ESM-2 (models/bert: esm2_family) and BertHDF5DataProcessor (data/bert_hdf5):
// logits against a float64 forward written op by op from modelzoo's ESM-2
// (token dropout, pre-norm layers, interleaved rotary, final norm, tied MLM
// head; to 1e-7, as q and k rotate in float32), h5py-written masked-LM files in both of modelzoo's layouts, a
// legacy ESM-2 config training, config errors, and `zoo convert` of Hugging
// Face's EsmForMaskedLM against its forward written from the ESM-2 paper's
// code (rotate_half rotary, HF's names).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "convert_fixtures.h"
#include "data/loader.h"
#include "models/bert/bert.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/convert/convert.h"
#include "runner/convert/safetensors.h"
#include "runner/params/params.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

// A small ESM-2 model section as modelzoo's ESM-2 configs write it (legacy:
// no name; token_dropout marks it).
const char* const kEsmModel = R"(model:
  vocab_size: 33
  hidden_size: 16
  num_hidden_layers: 2
  num_heads: 2
  filter_size: 32
  max_position_embeddings: 24
  position_embedding_type: rotary
  rotary_dim: 8
  disable_nsp: true
  embedding_layer_norm: false
  use_final_layer_norm: true
  token_dropout: true
  mask_token_id: 32
  pad_token_id: 1
  dropout_rate: 0.0
  encoder_nonlinearity: gelu
  mlm_nonlinearity: gelu
)";

std::string esm_params(const std::string& data_dir, const std::string& runconfig = "  seed: 1\n") {
  return "train_input:\n  data_processor: BertHDF5DataProcessor\n  data_dir: " + data_dir +
         "\n  batch_size: 8\n  shuffle: true\n  shuffle_seed: 2\n" + kEsmModel +
         "optimizer:\n  optimizer_type: Adam\n  learning_rate: 0.01\nrunconfig:\n" + runconfig;
}

// Masked-LM files as modelzoo's pre-training preprocessing writes them:
// 'data' (n, 2, 24) ids with <cls> 0 ... <eos> 2 and padding 1, and
// 'labels' (n, 1, 24) with -100 where nothing is masked, or gathered
// (n, 3, 4). Each sample repeats one token, 4 of them replaced by <mask> 32:
// what was masked can be learned from the rest.
void write_mlm(const std::string& dir, bool gather, int samples, int seed) {
  TempDir tmp;
  const std::string script = zoo::testing::write_file(tmp / "w.py", zoo::testing::oracle("esm2_write_hdf5.py"));
  const auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + dir + " " + (gather ? "1" : "0") + " " +
                                           std::to_string(samples) + " " + std::to_string(seed));
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

Params params_of(const std::string& yaml) {
  return params_from_node(config::load_yaml_string(yaml, "esm.yaml"), "esm.yaml", YAML::Node());
}

}  // namespace

// modelzoo's ESM-2 forward, op by op in float64: mask tokens embed as 0 and
// the rest scale by (1 - 0.12) / (1 - masked share); pre-norm layers with
// rotary (interleaved pairs, modelzoo's layout) on the first rotary_dim dims
// of q and k; the final norm; the MLM head (dense, GELU, LayerNorm, the
// tied word embeddings plus a bias).
TEST(Esm2, LogitsMatchTheReferenceForward) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  Params p = params_of(esm_params("/d"));
  EXPECT_EQ(p.model_name, "esm2");  // recognised by token_dropout
  auto built = p.model->build(torch::TensorOptions().dtype(torch::kDouble));
  auto& model = dynamic_cast<models::BertModel&>(*built);
  model.eval();
  torch::manual_seed(5);
  {  // non-zero biases and norms, so that each is checked
    torch::NoGradGuard no_grad;
    for (auto& w : model.parameters()) w.add_(torch::randn_like(w) * 0.1);
  }
  torch::Tensor ids = torch::randint(4, 29, {3, 20}, torch::kLong);
  torch::Tensor mask = torch::ones({3, 20}, torch::kLong);
  mask.index_put_({1, torch::indexing::Slice(14, torch::indexing::None)}, 0);
  ids.index_put_({1, torch::indexing::Slice(14, torch::indexing::None)}, 1);
  ids.index_put_({0, 3}, 32);
  ids.index_put_({0, 7}, 32);
  ids.index_put_({1, 2}, 32);
  const torch::Tensor logits = model.run(ids, mask, {}, {}).mlm_logits.narrow(-1, 0, 33).detach();
  TempDir dir;
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("state", ckpt::model_state_dict(model));
  d.insert("ids", ids);
  d.insert("mask", mask);
  d.insert("logits", logits);
  ckpt::save_checkpoint_file(dir / "case.pt", d);
  const std::string script = zoo::testing::write_file(dir / "ref.py", zoo::testing::oracle("esm2_reference.py"));
  const auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + (dir / "case.pt"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// BertHDF5DataProcessor reads both of modelzoo's label layouts: per-token
// labels with -100 (masked_lm_mask from them) and gathered ones.
TEST(BertHdf5Data, ReadsPerTokenAndGatheredLabels) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  write_mlm(dir / "dense", false, 6, 1);
  write_mlm(dir / "gathered", true, 6, 1);  // the same samples
  auto open = [&](const std::string& sub) {
    return zoo::testing::open_loader("{data_processor: BertHDF5DataProcessor, batch_size: 6, data_dir: " + (dir / sub) +
                                     "}");
  };
  auto dense_loader = open("dense");
  auto gathered_loader = open("gathered");
  const models::Features a = dense_loader->next(), b = gathered_loader->next();
  EXPECT_FALSE(a.count("masked_lm_positions"));
  ASSERT_TRUE(b.count("masked_lm_positions"));
  EXPECT_TRUE(torch::equal(a.at("input_ids"), b.at("input_ids")));
  EXPECT_TRUE(torch::equal(a.at("attention_mask"), b.at("attention_mask")));
  EXPECT_EQ(a.at("labels").sizes(), (std::vector<int64_t>{6, 24}));
  EXPECT_EQ(a.at("masked_lm_mask").sum().item<int64_t>(), 6 * 4);
  EXPECT_EQ(a.at("labels").min().item<int64_t>(), 0);  // -100 became 0, uncounted
  // The gathered labels are the per-token labels at their positions.
  EXPECT_TRUE(torch::equal(a.at("labels").gather(1, b.at("masked_lm_positions")), b.at("labels")));
  EXPECT_TRUE(torch::equal(a.at("masked_lm_mask").gather(1, b.at("masked_lm_positions")), b.at("masked_lm_mask")));
  EXPECT_TRUE(
      torch::equal(a.at("input_ids").gather(1, b.at("masked_lm_positions")), torch::full({6, 4}, 32, torch::kLong)));
  EXPECT_EQ(dense_loader->sequence_length(), 24);

  // Token ids beyond the vocabulary and files of another layout are named.
  auto small = open("dense");
  small->check_token_ids(20);
  try {
    small->next();
    ADD_FAILURE() << "ids up to 32 passed vocab_size 20";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("mlm_0.h5, sample "), std::string::npos) << e.what();
  }
  TempDir lm;
  const auto r = zoo::testing::run_command(
      "/usr/bin/python3 -c \"import h5py, numpy as np; "
      "h = h5py.File('" +
      (lm / "x.h5") +
      "', 'w'); "
      "h.create_dataset('data', data=np.zeros((4, 3, 8), np.int32))\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string e =
      zoo::testing::open_error("{data_processor: BertHDF5DataProcessor, batch_size: 2, data_dir: " + lm.path() + "}");
  EXPECT_NE(e.find("x.h5: no dataset 'labels'"), std::string::npos) << e;
}

// A legacy ESM-2 file (no model.name) trains on masked-LM HDF5 data: the
// loss falls and the masked tokens are learned; its errors are named.
TEST(Esm2, TrainsFromALegacyConfig) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  write_mlm(dir / "train", true, 64, 3);
  const std::string params = zoo::testing::write_file(
      dir / "esm.yaml", esm_params(dir / "train", "  seed: 1\n  max_steps: 100\n  log_steps: 1\n"));
  auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params +
                                     " --mode train --model_dir " + (dir / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("so zoo builds esm2"), std::string::npos) << r.output;
  const std::vector<double> losses = zoo::testing::train_losses(r.output);
  ASSERT_EQ(losses.size(), 100u) << r.output;
  const auto [first, last] = zoo::testing::first_and_last_means(losses, 10);
  EXPECT_LT(last, 0.4 * first) << first << " -> " << last;

  std::string bad = esm_params("/d");
  bad.replace(bad.find("  mask_token_id: 32\n"), 19, "");
  EXPECT_NE(zoo::testing::params_error(bad).find("model.mask_token_id: required with token_dropout"), std::string::npos)
      << zoo::testing::params_error(bad);
}

namespace {

// EsmForMaskedLM as Hugging Face lays it out (esm.*, lm_head.*, buffers and a
// contact head zoo drops), with its masked-LM logits on a padded batch that
// holds mask tokens: HF's math (q scaled, then both rotated as two halves of
// each head; token dropout; pre-norm layers; emb_layer_norm_after; the head).
const std::string kPyEsm = zoo::testing::oracle("esm2_make_esm.py");

}  // namespace

// HF's EsmForMaskedLM converts to zoo's esm2 with HF's logits (to 1e-5, real
// tokens) and back to the same tensors bit for bit (buffers and the contact
// head, which the masked LM does not use, stay behind).
TEST(ConvertEsm, MatchesTheReferenceAndRoundTrips) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  TempDir dir;
  zoo::testing::run_fixture(dir, "esm.py", kPyEsm);
  convert::run_convert({dir / "hf", "", "hf", "zoo", std::nullopt, dir / "zoo"});
  auto model = std::dynamic_pointer_cast<models::BertModel>(zoo::testing::load_converted(dir));
  ASSERT_TRUE(model);
  using zoo::testing::read_raw;
  const torch::Tensor ids = read_raw(dir / "ids.bin", torch::kLong, {2, 12}),
                      mask = read_raw(dir / "mask.bin", torch::kLong, {2, 12});
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = model->run(ids, mask, {}, {}).mlm_logits.narrow(-1, 0, 33);
  const torch::Tensor real = mask.to(torch::kBool).unsqueeze(-1);
  EXPECT_LT(((logits - read_raw(dir / "mlm.bin", torch::kFloat, {2, 12, 33})) * real).abs().max().item<double>(), 1e-5);
  const YAML::Node params = YAML::LoadFile(dir / "zoo/params.yaml");
  EXPECT_EQ(params["model"]["name"].as<std::string>(), "esm2");
  EXPECT_EQ(params["train_input"]["data_processor"].as<std::string>(), "BertHDF5DataProcessor");

  convert::run_convert({dir / "zoo/checkpoint_0.mdl", "", "zoo", "hf", std::nullopt, dir / "back"});
  auto original = convert::read_safetensors(dir / "hf/model.safetensors");
  auto back = convert::read_safetensors(dir / "back/model.safetensors");
  size_t compared = 0;
  for (const auto& [k, t] : original) {
    if (k.find("position_ids") != std::string::npos || k.find("inv_freq") != std::string::npos ||
        k.find("contact_head") != std::string::npos || k == "lm_head.decoder.weight")
      continue;  // buffers, the contact head, a tied copy
    ASSERT_TRUE(back.count(k)) << k << " did not come back";
    EXPECT_TRUE(torch::equal(t, back[k])) << k;
    ++compared;
  }
  EXPECT_EQ(compared, back.size()) << "the export wrote tensors the original did not have";
  const nlohmann::json config = nlohmann::json::parse(zoo::testing::read_file(dir / "back/config.json"));
  EXPECT_EQ(config.at("architectures")[0], "EsmForMaskedLM");
  EXPECT_EQ(config.at("mask_token_id"), 32);
  EXPECT_TRUE(config.at("token_dropout").get<bool>());

  // What HF's ESM has no field for is refused by name.
  YAML::Node y = YAML::Load(std::string(kEsmModel))["model"];
  y["norm_first"] = false;
  auto spec = models::find_model("esm2").parse(y, config::Context{"m.yaml", "model"});
  zoo::testing::expect_refused([&] { models::find_hf_converter("esm").config_to_hf(*spec); },
                               {"model.norm_first", "esm"});
}

// modelzoo's VSL samples pack sequences (attention_span, position_ids): each
// packed sequence gets the logits it gets alone (rotary scores depend on
// position differences only), and only the packing mask makes it so.
TEST(Esm2, PackedSequencesGetTheLogitsTheyGetAlone) {
  Params p = params_of(esm_params("/d"));
  auto built = p.model->build(torch::TensorOptions());
  auto& model = dynamic_cast<models::BertModel&>(*built);
  model.eval();
  torch::NoGradGuard no_grad;
  torch::manual_seed(9);
  const torch::Tensor a = torch::randint(4, 29, {1, 5}, torch::kLong), b = torch::randint(4, 29, {1, 4}, torch::kLong);
  const torch::Tensor packed = torch::cat({a, b, torch::ones({1, 3}, torch::kLong)}, 1);  // and 3 padding tokens
  const torch::Tensor mask = torch::cat({torch::ones({1, 9}, torch::kLong), torch::zeros({1, 3}, torch::kLong)}, 1);
  // Per token: tokens after it in its sequence, and before it (padding as a sequence of its own).
  const torch::Tensor span = torch::tensor({4, 3, 2, 1, 0, 3, 2, 1, 0, 2, 1, 0}, torch::kLong).unsqueeze(0);
  const torch::Tensor position_ids = torch::tensor({0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 1, 2}, torch::kLong).unsqueeze(0);
  auto logits = [&](const torch::Tensor& ids, const torch::Tensor& m, const torch::Tensor& bias) {
    return model.run(ids, m, {}, {}, bias).mlm_logits.narrow(-1, 0, 33);
  };
  const torch::Tensor together = logits(packed, mask, models::packed_sequence_bias(span, position_ids));
  const torch::Tensor alone_a = logits(a, torch::ones({1, 5}, torch::kLong), {});
  const torch::Tensor alone_b = logits(b, torch::ones({1, 4}, torch::kLong), {});
  EXPECT_LT((together.narrow(1, 0, 5) - alone_a).abs().max().item<double>(), 1e-5);
  EXPECT_LT((together.narrow(1, 5, 4) - alone_b).abs().max().item<double>(), 1e-5);
  const torch::Tensor unpacked = logits(packed, mask, {});  // the sequences see each other
  EXPECT_GT((unpacked.narrow(1, 5, 4) - alone_b).abs().max().item<double>(), 1e-3);
}

// BertHDF5DataProcessor with use_vsl reads 'data' (n, 4, msl) and passes
// attention_span and position_ids on; packed files without it are named.
TEST(BertHdf5Data, ReadsPackedSamplesWithUseVsl) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  const auto r = zoo::testing::run_command(
      "/usr/bin/python3 -c \"import h5py, numpy as np\n"
      "d = np.zeros((2, 4, 6), np.int32); d[:, 0] = [[0, 5, 2, 0, 6, 2]] * 2; d[:, 1] = 1\n"
      "d[:, 2] = [2, 1, 0, 2, 1, 0]; d[:, 3] = [0, 1, 2, 0, 1, 2]\n"
      "l = np.full((2, 1, 6), -100, np.int32); l[:, 0, 1] = 7\n"
      "h = h5py.File('" +
      (dir / "p.h5") + "', 'w'); h.create_dataset('data', data=d); h.create_dataset('labels', data=l)\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto loader = zoo::testing::open_loader(
      "{data_processor: BertHDF5DataProcessor, batch_size: 2, use_vsl: true, "
      "data_dir: " +
      dir.path() + "}");
  const models::Features f = loader->next();
  EXPECT_TRUE(torch::equal(f.at("attention_span")[0], torch::tensor({2, 1, 0, 2, 1, 0}, torch::kLong)));
  EXPECT_TRUE(torch::equal(f.at("position_ids")[1], torch::tensor({0, 1, 2, 0, 1, 2}, torch::kLong)));
  const torch::Tensor bias = models::packed_sequence_bias(f.at("attention_span"), f.at("position_ids"));
  EXPECT_EQ(bias[0][0][1][2].item<float>(), 0.0f);          // one sequence
  EXPECT_TRUE(std::isinf(bias[0][0][2][3].item<float>()));  // two
  const std::string e =
      zoo::testing::open_error("{data_processor: BertHDF5DataProcessor, batch_size: 2, data_dir: " + dir.path() + "}");
  EXPECT_NE(e.find("set use_vsl: true"), std::string::npos) << e;
}
