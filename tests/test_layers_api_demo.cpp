// modelzoo's layers-API tutorial (layers_api_demo): its forward against a
// float64 one written in Python from the tutorial's layers, its alphabet
// data, and its params file training as given.
#include <gtest/gtest.h>

#include "configs/schema/yaml_util.h"
#include "data/processors/alphabet.h"
#include "models/layers_api_demo/layers_api_demo.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/params/params.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

const char* kModel = R"(
vocab_size: 26
embedding_size: 16
num_heads: 2
hidden_size: 24
num_hidden_layers: 2
dropout: 0.0
seq_len: 10
nonlinearity: gelu
)";

std::shared_ptr<models::Model> build(const std::string& yaml, const torch::TensorOptions& p) {
  const auto& family = models::find_model("layers_api_demo");
  return family.parse(config::load_yaml_string(yaml, "model.yaml"), config::Context{"model.yaml", "model"})->build(p);
}

// The tutorial's model in float64: token embedding plus the interleaved
// sin/cos table, times sqrt(d); post-norm layers (causal attention and a
// GELU FFN, no biases); a linear decoder; GPTLMHeadModelLoss summed over
// counted tokens, divided by the batch size, times 1 / vocab.
const std::string kReference = zoo::testing::oracle("layers_api_demo_reference.py");

}  // namespace

TEST(LayersApiDemo, LossMatchesAFloat64ForwardWrittenFromTheTutorial) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  torch::manual_seed(7);
  auto built = build(kModel, torch::TensorOptions().dtype(torch::kDouble));
  auto& model = dynamic_cast<models::LayersApiDemoModel&>(*built);
  {
    torch::NoGradGuard no_grad;  // away from unit norms and zero biases
    for (auto& p : model.parameters()) p.add_(torch::randn_like(p) * 0.1);
  }
  const int64_t B = 3, T = 10;
  const torch::Tensor ids = torch::randint(0, 26, {B, T}, torch::kLong);
  const torch::Tensor labels = torch::randint(0, 26, {B, T}, torch::kLong);
  torch::Tensor mask = torch::ones({B, T}, torch::kLong);
  mask[1].narrow(0, 6, 4).zero_();
  const models::Features batch = {{"input_ids", ids}, {"labels", labels}, {"attention_mask", mask}};

  TempDir dir;
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("state", ckpt::model_state_dict(model));
  d.insert("ids", ids);
  d.insert("labels", labels);
  d.insert("mask", mask);
  d.insert("logits", model.logits(ids).detach());
  d.insert("loss", model.forward(batch, false).loss.detach());
  ckpt::save_checkpoint_file(dir / "case.pt", d);
  const std::string script = zoo::testing::write_file(dir / "ref.py", kReference);
  const auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + (dir / "case.pt"));
  EXPECT_EQ(r.exit_code, 0) << r.output;

  // Causal: a later token changes no earlier position's logits.
  torch::Tensor changed = ids.clone();
  changed.select(1, T - 1).fill_(25 - changed[0][T - 1].item<int64_t>());
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(model.logits(ids).narrow(1, 0, T - 1), model.logits(changed).narrow(1, 0, T - 1)));
}

// Each sample is seq_length + 1 consecutive letters from a start anywhere in
// [0, 26 - seq_length - 1]: inputs the first seq_length, labels one letter on.
TEST(AlphabetData, SamplesAreRunsOfLettersContinuedOneAhead) {
  data::AlphabetOptions o;
  o.num_samples = 400, o.seq_length = 10, o.batch_size = 8, o.seed = 1;
  const data::AlphabetSource source(o);
  std::vector<int> starts(26, 0);
  std::vector<int32_t> ids(10), mask(10), labels(10);
  for (int64_t i = 0; i < o.num_samples; ++i) {
    source.read(i, ids.data(), mask.data(), labels.data());
    ASSERT_GE(ids[0], 0);
    ASSERT_LE(ids[0], 26 - 10 - 1);
    ++starts[ids[0]];
    for (int t = 0; t < 10; ++t) {
      ASSERT_EQ(ids[t], ids[0] + t);
      ASSERT_EQ(labels[t], ids[t] + 1);
      ASSERT_EQ(mask[t], 1);
    }
  }
  for (int s = 0; s <= 15; ++s) EXPECT_GT(starts[s], 5) << "start " << s << " of 0..15 drawn too rarely";
  data::AlphabetOptions other = o;
  other.seed = 2;
  const data::AlphabetSource other_source(other);
  int same = 0;
  std::vector<int32_t> ids2(10);
  for (int64_t i = 0; i < 50; ++i) {
    source.read(i, ids.data(), mask.data(), labels.data());
    other_source.read(i, ids2.data(), mask.data(), labels.data());
    same += ids[0] == ids2[0];
  }
  EXPECT_LT(same, 25) << "another seed draws other starts";

  const std::string tiny = "data_processor: AlphabetDataProcessor\nnum_samples: 100\nseq_length: 26\nbatch_size: 8\n";
  try {
    data::AlphabetOptions::schema().parse(config::load_yaml_string(tiny, "p.yaml"),
                                          config::Context{"p.yaml", "train_input"});
    ADD_FAILURE() << "seq_length 26 accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("train_input.seq_length: expected at most 25"), std::string::npos) << e.what();
  }
}

// The tutorial's params file, as modelzoo ships it (configs/layers_api_demo):
// the family and its data come from the keys alone, and training lowers the loss.
TEST(LayersApiDemo, TheTutorialsParamsTrainOnTheAlphabetTask) {
  const std::string file = std::string(ZOO_SOURCE_DIR) + "/configs/layers_api_demo/params.yaml";
  const Params p = load_params(file, YAML::Node());
  EXPECT_EQ(p.model_name, "layers_api_demo");
  EXPECT_EQ(p.resolved()["train_input"]["data_processor"].as<std::string>(), "AlphabetDataProcessor");

  // Logged every step; nothing else changed.
  std::string as_given = zoo::testing::read_file(file);
  as_given.replace(as_given.find("log_steps: 100"), 14, "log_steps: 1");
  TempDir dir;
  auto train = [&](const std::string& params, const std::string& name) {
    const auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " +
                                             zoo::testing::write_file(dir / (name + ".yaml"), params) +
                                             " --mode train --max_steps 60 -o " + (dir / name));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const std::vector<double> losses = zoo::testing::train_losses(r.output);
    EXPECT_EQ(losses.size(), 60u) << r.output;
    return zoo::testing::first_and_last_means(losses, 10);
  };
  const auto [first, last] = train(as_given, "as_given");
  EXPECT_LT(last, first) << "the tutorial's learning rate (1e-4, decaying)";
  // At a learning rate 30 times the tutorial's, 60 steps learn most of the task.
  std::string faster = as_given;
  faster.replace(faster.find("initial_learning_rate: 1.0e-4"), 29, "initial_learning_rate: 3.0e-3");
  const auto [fast_first, fast_last] = train(faster, "faster");
  EXPECT_LT(fast_last, 0.5 * fast_first);
}
