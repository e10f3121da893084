// DPO (models/dpo, data/dpo_hdf5): the losses against their formulas, the
// policy's scores against its own logits, preference data as modelzoo's DPO
// preprocessing writes it (h5py), training from legacy and Trainer-format
// configs, starting from a plain decoder checkpoint, exact resume, and
// config errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>

#include "data/loader.h"
#include "data/registry.h"
#include "models/dpo/dpo.h"
#include "models/gpt2/gpt2.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/params/params.h"
#include "runner/run.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

double log_sigmoid(double x) { return -std::log1p(std::exp(-x)); }

// Pairs as modelzoo's DPO preprocessing lays them out (int32 (n, 6, 16);
// rows chosen ids / mask / labels, then rejected's): a 4-token prompt and an
// 8-token response, the loss mask on the response's labels only. Chosen
// responses use even token ids, rejected ones odd ids: a preference the
// policy can learn and that holds on unseen pairs. `rows` reorders the rows.
void write_pairs(const std::string& dir, const std::string& files, int seed, const std::string& rows = "0,1,2,3,4,5",
                 int row_count = 6) {
  TempDir tmp;
  const std::string script = zoo::testing::write_file(tmp / "w.py", zoo::testing::oracle("dpo_write_hdf5.py"));
  std::filesystem::create_directories(dir);
  const auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + dir + " " + files + " " +
                                           std::to_string(seed) + " " + rows + " " + std::to_string(row_count));
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

const char* const kPolicyKeys = R"(
  vocab_size: 32
  hidden_size: 32
  num_hidden_layers: 2
  num_heads: 2
  filter_size: 64
  max_position_embeddings: 16
)";

// A legacy DPO params file (policy keys beside dpo's, named by model_name).
std::string legacy_params(const std::string& data, const std::string& dpo, const std::string& extra_model = "",
                          const std::string& runconfig = "") {
  const std::string input = "  data_processor: DpoHDF5DataProcessor\n  batch_size: 8\n";
  return "train_input:\n" + input + "  data_dir: " + data + "/train\n  shuffle: true\n  shuffle_seed: 5\n" +
         "eval_input:\n" + input + "  data_dir: " + data + "/eval\n" + "model:\n  dpo: " + dpo +
         "\n  compute_eval_metrics: true\n  model_name: gpt2\n" + kPolicyKeys +
         "  dropout_rate: 0.1\n  mixed_precision: false\n" + extra_model + R"(optimizer:
  optimizer_type: AdamW
  learning_rate: 0.003
  weight_decay: 0.0
  max_gradient_norm: 1.0
runconfig:
  seed: 1
  log_steps: 1
)" + runconfig;
}

// "Metric: eval/<name> = <v>" lines of a run's output, the last of each.
double eval_metric(const std::string& output, const std::string& name) {
  const std::regex re("Metric: eval/" + name + " = ([-0-9.e+]+)");
  double v = std::nan("");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), re); it != std::sregex_iterator(); ++it)
    v = std::stod((*it)[1]);
  return v;
}

Params params_of(const std::string& yaml) {
  return params_from_node(config::load_yaml_string(yaml, "dpo.yaml"), "dpo.yaml", YAML::Node());
}

// Each response's summed label log-likelihood from the decoder's logits (B).
torch::Tensor scores(models::Gpt2Model& m, const torch::Tensor& ids, const torch::Tensor& mask,
                     const torch::Tensor& labels) {
  const torch::Tensor logp = torch::log_softmax(m.logits(ids).to(torch::kDouble), -1);
  return (logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1) * mask).sum(-1);
}

}  // namespace

// modelzoo's DPOLoss, each type, written out per pair from the papers' formulas.
TEST(DpoLoss, EachTypeMatchesItsFormula) {
  const torch::Tensor pc = torch::tensor({-10.0, -3.0, -7.5}, torch::kDouble);
  const torch::Tensor pr = torch::tensor({-12.0, -2.0, -7.0}, torch::kDouble);
  const torch::Tensor rc = torch::tensor({-11.0, -2.5, -6.0}, torch::kDouble);
  const torch::Tensor rr = torch::tensor({-11.5, -2.5, -8.0}, torch::kDouble);
  models::DpoParameters p;
  p.beta = 0.3;
  for (const std::string type : {"sigmoid", "hinge", "ipo", "dpop"}) {
    p.loss_type = type;
    const torch::Tensor got = models::dpo_losses(pc, pr, rc, rr, p);
    for (int64_t i = 0; i < 3; ++i) {
      const double a = pc[i].item<double>(), b = pr[i].item<double>(), c = rc[i].item<double>(),
                   d = rr[i].item<double>();
      double z = (a - b) - (c - d), want = 0;
      if (type == "sigmoid") want = -log_sigmoid(p.beta * z);
      if (type == "hinge") want = std::max(0.0, 1 - p.beta * z);
      if (type == "ipo") want = (z - 1 / (2 * p.beta)) * (z - 1 / (2 * p.beta));
      if (type == "dpop") want = -log_sigmoid(p.beta * (z - p.dpop_penalty_weight * std::max(0.0, c - a)));
      EXPECT_NEAR(got[i].item<double>(), want, 1e-12) << type << " pair " << i;
    }
  }
  p.loss_type = "sigmoid";
  p.reference_free = true;  // the reference's log-ratio is 0
  const torch::Tensor free = models::dpo_losses(pc, pr, torch::Tensor(), torch::Tensor(), p);
  EXPECT_NEAR(free[1].item<double>(), -log_sigmoid(p.beta * (-3.0 + 2.0)), 1e-12);
}

// The model scores each response by its decoder's own log-probabilities of
// the masked labels; policy and reference start equal (loss log 2); only
// the policy gets gradients; eval metrics are modelzoo's.
TEST(Dpo, ScoresResponsesWithThePolicyAndAFrozenReference) {
  Params p = params_of(legacy_params("/d", "{beta: 0.5}"));
  EXPECT_EQ(p.model_name, "dpo");
  auto model = std::dynamic_pointer_cast<models::DpoModel>(p.model->build(torch::TensorOptions()));
  ASSERT_TRUE(model && model->reference());
  auto& policy = dynamic_cast<models::Gpt2Model&>(model->policy());
  auto& reference = dynamic_cast<models::Gpt2Model&>(*model->reference());
  torch::manual_seed(3);
  const int64_t B = 3, T = 16;
  models::Features batch;
  for (const char* side : {"chosen_", "rejected_"}) {
    batch[std::string(side) + "input_ids"] = torch::randint(0, 32, {B, T}, torch::kLong);
    batch[std::string(side) + "labels"] = torch::randint(0, 32, {B, T}, torch::kLong);
    batch[std::string(side) + "attention_mask"] = (torch::rand({B, T}) > 0.3).to(torch::kLong);
  }
  model->train();
  EXPECT_FALSE(model->reference()->is_training());
  EXPECT_NEAR(model->forward(batch, false).loss.item<double>(), std::log(2.0), 1e-6);  // policy == reference

  {  // the policy moves away from the reference
    torch::NoGradGuard no_grad;
    for (auto& w : policy.parameters()) w.add_(torch::randn_like(w) * 0.05);
  }
  const models::ModelOutput out = model->forward(batch, true);
  out.loss.backward();
  auto score = [&](models::Gpt2Model& m, const std::string& side) {
    torch::NoGradGuard no_grad;
    return scores(m, batch.at(side + "input_ids"), batch.at(side + "attention_mask"), batch.at(side + "labels"));
  };
  const torch::Tensor pc = score(policy, "chosen_"), pr = score(policy, "rejected_");
  const torch::Tensor rc = score(reference, "chosen_"), rr = score(reference, "rejected_");
  const torch::Tensor z = (pc - pr) - (rc - rr);
  double want = 0;
  for (int64_t i = 0; i < B; ++i) want += -log_sigmoid(0.5 * z[i].item<double>()) / B;
  EXPECT_NEAR(out.loss.item<double>(), want, 1e-5);
  auto metric = [&](const char* name) {
    const auto& m = out.metrics.at(name);
    return m.sum.item<double>() / m.count.item<double>();
  };
  EXPECT_NEAR(metric("logps_chosen"), pc.mean().item<double>(), 1e-4);
  EXPECT_NEAR(metric("logps_rejected"), pr.mean().item<double>(), 1e-4);
  EXPECT_NEAR(metric("rewards_chosen"), (0.5 * (pc - rc)).mean().item<double>(), 1e-5);
  EXPECT_NEAR(metric("rewards_margins"), (0.5 * z).mean().item<double>(), 1e-5);
  EXPECT_NEAR(metric("rewards_accuracies"), (z > 0).to(torch::kDouble).mean().item<double>(), 1e-6);
  for (const auto& w : policy.named_parameters()) EXPECT_TRUE(w.value().grad().defined()) << w.key();
  for (const auto& w : reference.named_parameters()) {
    EXPECT_FALSE(w.value().requires_grad()) << w.key();
    EXPECT_FALSE(w.value().grad().defined()) << w.key();
  }

  // ipo scores by the mean over the mask instead of the sum.
  Params ipo = params_of(legacy_params("/d", "{beta: 0.5, loss_type: ipo}"));
  auto ipo_model = std::dynamic_pointer_cast<models::DpoModel>(ipo.model->build(torch::TensorOptions()));
  ipo_model->eval();
  EXPECT_NEAR(ipo_model->forward(batch, false).loss.item<double>(), 1.0, 1e-9);  // z = 0: (0 - 1 / (2 * 0.5))^2

  // Checkpoint keys are modelzoo's: policy_model.model.* and ref_model.model.*.
  const auto state = ckpt::model_state_dict(*model);
  EXPECT_TRUE(state.contains("policy_model.model.transformer_decoder.layers.0.norm1.weight"));
  EXPECT_TRUE(state.contains("ref_model.model.transformer_decoder.layers.0.norm1.weight"));
  EXPECT_EQ(state.size(), 2 * ckpt::model_state_dict(policy).size());
}

// disable_dropout (on by default) turns the policy's dropout keys to 0.
TEST(Dpo, DisableDropoutZeroesThePolicysDropout) {
  Params on = params_of(legacy_params("/d", "{beta: 0.1}"));
  Params off = params_of(legacy_params("/d", "{beta: 0.1, disable_dropout: false}"));
  EXPECT_EQ(on.model->to_yaml()["policy_model"]["dropout_rate"].as<double>(), 0.0);
  EXPECT_EQ(off.model->to_yaml()["policy_model"]["dropout_rate"].as<double>(), 0.1);
  EXPECT_EQ(on.model->to_yaml()["policy_model"]["name"].as<std::string>(), "gpt2");
  models::Features batch;
  for (const char* side : {"chosen_", "rejected_"}) {
    batch[std::string(side) + "input_ids"] = torch::randint(0, 32, {2, 16}, torch::kLong);
    batch[std::string(side) + "labels"] = torch::randint(0, 32, {2, 16}, torch::kLong);
    batch[std::string(side) + "attention_mask"] = torch::ones({2, 16}, torch::kLong);
  }
  for (auto* p : {&on, &off}) {
    auto model = p->model->build(torch::TensorOptions());
    model->train();
    const double a = model->forward(batch, false).loss.item<double>(),
                 b = model->forward(batch, false).loss.item<double>();
    if (p == &on) EXPECT_EQ(a, b);
    else EXPECT_NE(a, b);
  }
}

// DpoHDF5DataProcessor reads h5py-written pairs in features_list's row
// order, checks each response as LM data is checked, and names bad files.
TEST(DpoData, ReadsPairsInFeaturesListOrder) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  write_pairs(dir / "std", "5", 4);
  write_pairs(dir / "swapped", "5", 4, "3,4,5,0,1,2");  // rejected rows first
  auto loader = zoo::testing::open_loader(
      "{data_processor: DpoHDF5DataProcessor, batch_size: 5, data_dir: " + (dir / "std") + "}");
  const models::Features b = loader->next();
  ASSERT_EQ(b.size(), 6u);
  EXPECT_EQ(b.at("chosen_input_ids").sizes(), (std::vector<int64_t>{5, 16}));
  EXPECT_EQ(b.at("chosen_input_ids").remainder(2).narrow(1, 4, 8).sum().item<int64_t>(), 0);  // even responses
  EXPECT_EQ(b.at("rejected_input_ids").remainder(2).narrow(1, 4, 8).sum().item<int64_t>(), 5 * 8);
  EXPECT_TRUE(torch::equal(b.at("chosen_labels").narrow(1, 0, 11), b.at("chosen_input_ids").narrow(1, 1, 11)));
  EXPECT_EQ(b.at("chosen_attention_mask").sum().item<int64_t>(), 5 * 8);
  auto swapped = zoo::testing::open_loader(
      "{data_processor: DpoHDF5DataProcessor, batch_size: 5, data_dir: " + (dir / "swapped") +
      ", features_list: [rejected_input_ids, rejected_attention_mask, rejected_labels, chosen_input_ids, "
      "chosen_attention_mask, chosen_labels]}");
  const models::Features s = swapped->next();
  for (const auto& [name, t] : b) EXPECT_TRUE(torch::equal(t, s.at(name))) << name;

  write_pairs(dir / "lm", "4", 4, "0,1,2,3,4,5", 3);  // LM-shaped files
  const std::string lm =
      zoo::testing::open_error("{data_processor: DpoHDF5DataProcessor, batch_size: 2, data_dir: " + (dir / "lm") + "}");
  EXPECT_NE(lm.find("pairs_0.h5: dataset 'data' has shape (4, 3, 16), expected (n, 6, msl)"), std::string::npos) << lm;
  const std::string order =
      zoo::testing::open_error("{data_processor: DpoHDF5DataProcessor, batch_size: 2, data_dir: " + (dir / "std") +
                               ", features_list: [input_ids, attention_mask, labels]}");
  EXPECT_NE(order.find("train_input.features_list"), std::string::npos) << order;
  // Token ids beyond the policy's vocabulary are named with their response.
  auto small = zoo::testing::open_loader(
      "{data_processor: DpoHDF5DataProcessor, batch_size: 5, data_dir: " + (dir / "std") + "}");
  small->check_token_ids(20);
  try {
    small->next();
    ADD_FAILURE() << "ids up to 31 passed vocab_size 20";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("response)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("outside the model's vocabulary"), std::string::npos) << e.what();
  }
}

// A legacy DPO config trains from a plain decoder checkpoint (policy and
// reference both start from it: loss log 2), learns the preference (eval
// rewards_accuracies near 1 on unseen pairs), keeps the reference as it
// was, saves modelzoo's keys, and resumes exactly.
TEST(Dpo, TrainsFromADecoderCheckpointAndResumes) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  write_pairs(dir / "data/train", "48,48", 1);
  write_pairs(dir / "data/eval", "32", 2);
  // The "fine-tuned" decoder DPO starts from: a gpt2 checkpoint of the policy's shape.
  const std::string yaml =
      legacy_params(dir / "data", "{beta: 0.5}", "",
                    "  max_steps: 40\n  checkpoint_steps: 20\n  eval_steps: 4\n  eval_frequency: 40\n"
                    "  load_checkpoint_states: model\n");
  Params p = params_of(yaml);
  auto built = std::dynamic_pointer_cast<models::DpoModel>(p.model->build(torch::TensorOptions()));
  {
    torch::NoGradGuard no_grad;
    for (auto& w : built->policy().parameters()) w.add_(torch::randn_like(w) * 0.01);
  }
  c10::impl::GenericDict sft(c10::StringType::get(), c10::AnyType::get());
  sft.insert("model", ckpt::model_state_dict(built->policy()));
  ckpt::save_checkpoint_file(dir / "sft.mdl", sft);

  const std::string params = zoo::testing::write_file(dir / "dpo.yaml", yaml);
  auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params +
                                     " --mode train_and_eval --model_dir " + (dir / "run") + " --checkpoint_path " +
                                     (dir / "sft.mdl"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<double> losses = zoo::testing::train_losses(r.output);
  ASSERT_EQ(losses.size(), 40u) << r.output;
  EXPECT_NEAR(losses.front(), std::log(2.0), 1e-4);
  EXPECT_LT(losses.back(), 0.2) << r.output;
  EXPECT_GT(eval_metric(r.output, "rewards_accuracies"), 0.9) << r.output;
  EXPECT_GT(eval_metric(r.output, "rewards_margins"), 1.0) << r.output;
  EXPECT_NE(r.output.find("trained, the rest frozen"), std::string::npos) << r.output;

  const auto saved = ckpt::load_checkpoint_file(dir / "run/checkpoint_40.mdl").at("model").toGenericDict();
  const auto start = sft.at("model").toGenericDict();
  EXPECT_EQ(saved.size(), 2 * start.size());
  bool policy_moved = false;
  for (const auto& kv : start) {
    const std::string key = kv.key().toStringRef().substr(6);  // without "model."
    ASSERT_TRUE(saved.contains("ref_model.model." + key) && saved.contains("policy_model.model." + key)) << key;
    EXPECT_TRUE(torch::equal(saved.at("ref_model.model." + key).toTensor(), kv.value().toTensor())) << key;
    policy_moved =
        policy_moved || !torch::equal(saved.at("policy_model.model." + key).toTensor(), kv.value().toTensor());
  }
  EXPECT_TRUE(policy_moved);

  // `zoo convert` exports the policy alone (modelzoo's converter drops ref_model.*): back from
  // Hugging Face, it is the policy's weights under plain decoder keys.
  r = zoo::testing::run_command(zoo::testing::zoo_binary() + " convert " + (dir / "run/checkpoint_40.mdl") +
                                " --model gpt2 --src-fmt zoo --tgt-fmt hf --output-dir " + (dir / "hf") + " && " +
                                zoo::testing::zoo_binary() + " convert " + (dir / "hf") +
                                " --src-fmt hf --tgt-fmt zoo --output-dir " + (dir / "back"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto back = ckpt::load_checkpoint_file(dir / "back/checkpoint_0.mdl").at("model").toGenericDict();
  EXPECT_EQ(back.size(), start.size());
  for (const auto& kv : back) {
    const std::string key = "policy_model." + kv.key().toStringRef();  // "model.<k>" -> policy_model.model.<k>
    ASSERT_TRUE(saved.contains(key)) << key;
    EXPECT_TRUE(torch::equal(saved.at(key).toTensor(), kv.value().toTensor())) << key;
  }

  // Resumed from step 20 (everything this time), the run repeats steps 21..40.
  std::filesystem::create_directories(dir / "resumed");
  std::filesystem::copy_file(dir / "run/checkpoint_20.mdl", dir / "resumed/checkpoint_20.mdl");
  const std::string all_states = zoo::testing::write_file(
      dir / "resume.yaml", legacy_params(dir / "data", "{beta: 0.5}", "", "  max_steps: 40\n  checkpoint_steps: 20\n"));
  r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + all_states +
                                " --mode train --model_dir " + (dir / "resumed"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(zoo::testing::train_losses(r.output), std::vector<double>(losses.begin() + 20, losses.end())) << r.output;
}

// modelzoo 2.4+'s Trainer format (name: dpo, policy_model: {name: ...}) trains a LLaMA-style policy.
TEST(Dpo, TrainsFromTheTrainerFormat) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  write_pairs(dir / "train", "32", 1);
  const std::string params =
      zoo::testing::write_file(dir / "trainer.yaml", R"(trainer:
  init:
    seed: 1
    model:
      name: dpo
      dpo:
        beta: 0.5
        loss_type: hinge
      compute_eval_metrics: true
      policy_model:
        name: llama)" + std::regex_replace(std::string(kPolicyKeys), std::regex("\n  "), "\n        ") +
                                                         R"(        position_embedding_type: rotary
        norm_type: rmsnorm
        nonlinearity: swiglu
        attention_module: multiquery_attention
        extra_attention_params: {num_kv_groups: 1}
        dropout_rate: 0.0
    optimizer:
      AdamW:
        learning_rate: 0.003
    loop:
      max_steps: 20
    logging:
      log_steps: 1
  fit:
    train_dataloader:
      data_processor: DpoHDF5DataProcessor
      data_dir: )" + (dir / "train") + R"(
      batch_size: 8
      shuffle: true
      shuffle_seed: 1337
)");
  auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params +
                                     " --mode train --model_dir " + (dir / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<double> losses = zoo::testing::train_losses(r.output);
  ASSERT_EQ(losses.size(), 20u) << r.output;
  EXPECT_NEAR(losses.front(), 1.0, 1e-6);  // hinge at z = 0
  EXPECT_LT(losses.back(), 0.5) << r.output;
}

// Bad DPO sections are named by key and line.
TEST(Dpo, ConfigErrorsNameTheKey) {
  const std::string good = legacy_params("/d", "{beta: 0.1}");
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    return zoo::testing::params_error(s.replace(s.find(from), from.size(), to));
  };
  std::string e = with("  model_name: gpt2\n", "");
  EXPECT_NE(e.find("model.model_name: required"), std::string::npos) << e;
  e = with("model_name: gpt2", "model_name: gpt9");
  EXPECT_NE(e.find("model.model_name: unknown model 'gpt9'"), std::string::npos) << e;
  e = with("{beta: 0.1}", "{beta: 0.1, loss_type: dpop, reference_free: true}");
  EXPECT_NE(e.find("model.dpo.loss_type"), std::string::npos) << e;
  e = with("{beta: 0.1}", "{beta: 0.1, loss: ipo}");
  EXPECT_NE(e.find("model.dpo.loss: unknown key"), std::string::npos) << e;
  std::string typo = good;
  typo.replace(typo.find("  hidden_size: 32\n"), 0, "  hidden_sise: 32\n");
  e = zoo::testing::params_error(typo);
  EXPECT_NE(e.find("p.yaml:" + zoo::testing::line_of(typo, "hidden_sise")), std::string::npos) << e;
  EXPECT_NE(e.find("model.hidden_sise: unknown key"), std::string::npos) << e;
  // The nested layout names the policy's keys under policy_model.
  YAML::Node nested = YAML::Load(good);
  nested["model"] = YAML::Load("{dpo: {beta: 0.1}, policy_model: {name: gpt2, hidden_sise: 3}}");
  e = zoo::testing::params_error(YAML::Dump(nested));
  EXPECT_NE(e.find("model.policy_model.hidden_sise: unknown key"), std::string::npos) << e;
  nested["model"] = YAML::Load("{dpo: {beta: 0.1}, policy_model: {name: fc_mnist, hidden_size: 8, depth: 1}}");
  e = zoo::testing::params_error(YAML::Dump(nested));
  EXPECT_NE(e.find("model.policy_model.name: DPO trains a causal decoder"), std::string::npos) << e;
}
