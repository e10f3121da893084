// DPR (models/dpr, data/dpr_hdf5): the contrastive loss against its formula
// for each pooler and option, a uni-encoder checkpoint starting both
// encoders, h5py-written questions and contexts as modelzoo's DPR conversion
// lays them out, training from a Trainer-format config that shares its
// encoder section through a YAML merge key, and config errors.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <regex>

#include "data/loader.h"
#include "models/dpr/dpr.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/params/params.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

const char* const kEncoder = R"({vocab_size: 50, hidden_size: 16, num_hidden_layers: 1, num_heads: 2,
    filter_size: 32, max_position_embeddings: 16, dropout_rate: 0.0, pooler_nonlinearity: tanh})";

Params dpr_params(const std::string& model_extra) {
  const std::string yaml =
      std::string("train_input: {data_processor: DPRHDF5DataProcessor, data_dir: /d, batch_size: 4}\n") +
      "model:\n  name: dpr\n  q_encoder: &enc " + kEncoder + "\n  ctx_encoder: {<<: *enc}\n" + model_extra +
      "optimizer: {optimizer_type: Adam, learning_rate: 0.001}\nrunconfig: {seed: 1}\n";
  return params_from_node(config::load_yaml_string(yaml, "dpr.yaml"), "dpr.yaml", YAML::Node());
}

// Questions and their contexts as modelzoo's DPR conversion writes them:
// data_0 (n, 3, 8) question ids / mask / token types, data_1 (n, 3, 2, 8)
// the positive context then a hard negative. A question repeats one topic
// token (of 45); its positive context repeats it too, the negative another topic's.
void write_dpr(const std::string& dir, int files, int per_file, int seed) {
  TempDir tmp;
  const std::string script = zoo::testing::write_file(tmp / "w.py", zoo::testing::oracle("dpr_write_hdf5.py"));
  const auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + dir + " " + std::to_string(files) +
                                           " " + std::to_string(per_file) + " " + std::to_string(seed));
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

models::Features random_batch(int64_t B, int64_t N, int64_t T) {
  torch::manual_seed(4);
  models::Features f;
  f["questions_input_ids"] = torch::randint(4, 50, {B, T}, torch::kLong);
  f["questions_attention_mask"] = (torch::arange(T) < 5).to(torch::kLong).expand({B, T}).clone();
  f["questions_token_type_ids"] = torch::zeros({B, T}, torch::kLong);
  f["ctx_input_ids"] = torch::randint(4, 50, {B, N, T}, torch::kLong);
  f["ctx_attention_mask"] = (torch::rand({B, N, T}) > 0.2).to(torch::kLong);
  f["ctx_attention_mask"].select(2, 0).fill_(1);
  f["ctx_token_type_ids"] = torch::zeros({B, N, T}, torch::kLong);
  return f;
}

// -log softmax(row / t)[label], in double.
double cross_entropy(const torch::Tensor& scores, const torch::Tensor& labels, double t) {
  const torch::Tensor s = scores.to(torch::kDouble) / t;
  return -(s.log_softmax(-1).gather(1, labels.unsqueeze(1))).mean().item<double>();
}

}  // namespace

// q2c = pooled questions x pooled contexts; question i's positive is column
// i N; mutual information adds the positives' context-to-question loss with
// weight 1 / (1 + N); temperature and scale_similarity divide the scores.
TEST(Dpr, LossIsTheContrastiveCrossEntropyForEachPooler) {
  const int64_t B = 3, N = 2, T = 8;
  const models::Features batch = random_batch(B, N, T);
  for (const std::string pooler : {"cls", "mean", "ffn_pooler"}) {
    for (const bool mutual : {false, true}) {
      Params p = dpr_params("  pooler_type: " + pooler + "\n  softmax_temperature: 0.5\n  scale_similarity: true\n" +
                            (mutual ? "  mutual_information: true\n" : "") + "  compute_eval_metrics: true\n");
      auto built = p.model->build(torch::TensorOptions());
      auto& model = dynamic_cast<models::DprModel&>(*built);
      model.eval();
      torch::NoGradGuard no_grad;
      auto pooled = [&](models::BertEncoder& enc, const torch::Tensor& ids, const torch::Tensor& mask,
                        const torch::Tensor& types) {
        auto [h, pool] = enc->forward(ids, mask, types);
        if (pooler == "cls") return h.select(1, 0);
        if (pooler == "ffn_pooler") return pool;
        const torch::Tensor m = mask.to(torch::kFloat).unsqueeze(-1);
        return (h * m).sum(1) / m.sum(1);
      };
      const torch::Tensor q = pooled(model.question_encoder, batch.at("questions_input_ids"),
                                     batch.at("questions_attention_mask"), batch.at("questions_token_type_ids"));
      const torch::Tensor c =
          pooled(model.ctx_encoder, batch.at("ctx_input_ids").view({B * N, T}),
                 batch.at("ctx_attention_mask").view({B * N, T}), batch.at("ctx_token_type_ids").view({B * N, T}));
      const double scale = std::sqrt(16.0);
      const torch::Tensor q2c = q.matmul(c.t()) / scale;
      double want = cross_entropy(q2c, torch::arange(B) * N, 0.5);
      if (mutual) {
        const torch::Tensor c2q = c.view({B, N, -1}).select(1, 0).matmul(q.t()) / scale;
        want = (1 - 1.0 / 3) * want + (1.0 / 3) * cross_entropy(c2q, torch::arange(B), 0.5);
      }
      const models::ModelOutput out = model.forward(batch, true);
      EXPECT_NEAR(out.loss.item<double>(), want, 1e-5) << pooler << (mutual ? " with mutual information" : "");
      const double correct = (q2c.argmax(-1) == torch::arange(B) * N).sum().item<double>();
      EXPECT_EQ(out.metrics.at("accuracy").sum.item<double>(), correct) << pooler;
      EXPECT_EQ(out.metrics.at("accuracy").count.item<double>(), double(B)) << pooler;
    }
  }
  // One shared encoder (use_biencoder: false) scores contexts with the question encoder.
  YAML::Node uni = YAML::Load("{encoder: " + std::string(kEncoder) + ", use_biencoder: false}");
  auto spec = models::find_model("dpr").parse(uni, config::Context{"m.yaml", "model"});
  auto shared = std::dynamic_pointer_cast<models::DprModel>(spec->build(torch::TensorOptions()));
  EXPECT_FALSE(shared->ctx_encoder);
  EXPECT_TRUE(std::isfinite(shared->forward(batch, false).loss.item<double>()));

  // A uni-encoder checkpoint (question_encoder.* only) starts both encoders of a bi-encoder, as modelzoo's loader.
  Params bi = dpr_params("");
  auto two = std::dynamic_pointer_cast<models::DprModel>(bi.model->build(torch::TensorOptions()));
  ckpt::load_model_state_dict(*two, ckpt::model_state_dict(*shared), /*strict=*/true, "uni.mdl");
  const auto loaded = ckpt::model_state_dict(*two);
  for (const auto& kv : ckpt::model_state_dict(*shared)) {
    const std::string key = kv.key().toStringRef();  // model.question_encoder.<k>
    const std::string ctx = "model.ctx_encoder." + key.substr(std::string("model.question_encoder.").size());
    EXPECT_TRUE(torch::equal(loaded.at(key).toTensor(), kv.value().toTensor())) << key;
    EXPECT_TRUE(torch::equal(loaded.at(ctx).toTensor(), kv.value().toTensor())) << ctx;
  }
}

// DPRHDF5DataProcessor reads modelzoo's data_0 / data_1 files; a modelzoo
// 2.4+ Trainer-format DPR config (ctx_encoder merged from q_encoder's
// anchor), both encoders started from one encoder's checkpoint, trains on
// them until eval picks each question's positive context.
TEST(Dpr, TrainsOnModelzoosDprFiles) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  write_dpr(dir / "train", 2, 128, 1);
  write_dpr(dir / "val", 1, 32, 2);
  auto loader = zoo::testing::open_loader(
      "{data_processor: DPRHDF5DataProcessor, batch_size: 4, data_dir: " + (dir / "val") + "}");
  const models::Features b = loader->next();
  EXPECT_EQ(b.at("ctx_input_ids").sizes(), (std::vector<int64_t>{4, 2, 8}));
  EXPECT_EQ(b.at("questions_input_ids").sizes(), (std::vector<int64_t>{4, 8}));
  EXPECT_TRUE(torch::equal(b.at("questions_input_ids").select(1, 1), b.at("ctx_input_ids").select(1, 0).select(1, 1)));
  EXPECT_FALSE(torch::equal(b.at("questions_input_ids").select(1, 1), b.at("ctx_input_ids").select(1, 1).select(1, 1)));

  const std::string params = zoo::testing::write_file(dir / "dpr.yaml", R"(trainer:
  init:
    seed: 1
    model:
      name: dpr
      q_encoder: &base_model
        vocab_size: 50
        hidden_size: 32
        num_hidden_layers: 1
        num_heads: 2
        filter_size: 64
        pooler_nonlinearity: tanh
        dropout_rate: 0.0
        attention_dropout_rate: 0.0
        max_position_embeddings: 8
      ctx_encoder:
        <<: *base_model
      pooler_type: mean
      compute_eval_metrics: true
    optimizer:
      Adam:
        learning_rate: 0.005
    loop:
      max_steps: 400
      eval_frequency: 400
      eval_steps: 4
    logging:
      log_steps: 1
  fit:
    train_dataloader:
      data_processor: DPRHDF5DataProcessor
      data_dir: )" + (dir / "train") + R"(
      batch_size: 8
      shuffle: true
      shuffle_seed: 1
      shuffle_buffer: 64
    val_dataloader:
      data_processor: DPRHDF5DataProcessor
      data_dir: )" + (dir / "val") + R"(
      batch_size: 8
)");
  // Both encoders start from one encoder's checkpoint, as DPR training starts from one BERT: a
  // uni-encoder checkpoint (question_encoder.* only) loads into both.
  YAML::Node uni = YAML::Load(
      "{encoder: {vocab_size: 50, hidden_size: 32, num_hidden_layers: 1, num_heads: 2, "
      "filter_size: 64, pooler_nonlinearity: tanh, max_position_embeddings: 8}, "
      "use_biencoder: false, pooler_type: mean}");
  torch::manual_seed(1);
  auto encoder =
      models::find_model("dpr").parse(uni, config::Context{"m.yaml", "model"})->build(torch::TensorOptions());
  c10::impl::GenericDict start(c10::StringType::get(), c10::AnyType::get());
  start.insert("model", ckpt::model_state_dict(*encoder));
  ckpt::save_checkpoint_file(dir / "uni.mdl", start);
  auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params +
                                     " --mode train_and_eval --model_dir " + (dir / "run") + " --checkpoint_path " +
                                     (dir / "uni.mdl") + " --load_checkpoint_states model");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<double> losses = zoo::testing::train_losses(r.output);
  ASSERT_EQ(losses.size(), 400u) << r.output;
  // Both encoders start alike, so a question already scores its topic's contexts highest: far below the
  // log(16) of 16 contexts that score alike; then training lowers the loss further.
  EXPECT_LT(losses.front(), 0.5 * std::log(16.0)) << r.output;
  const auto [first, last] = zoo::testing::first_and_last_means(losses, 20);
  EXPECT_LT(last, 0.7 * first) << first << " -> " << last;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("Metric: eval/accuracy = ([0-9.e+-]+)"))) << r.output;
  // Questions of one topic in a batch share their positive's content: a tie the argmax may break either way.
  EXPECT_GT(std::stod(m[1]), 0.75) << r.output;

  const std::string bad = zoo::testing::open_error(
      "{data_processor: DPRHDF5DataProcessor, batch_size: 2, data_dir: " + (dir / "run") + "}");
  EXPECT_NE(bad.find("train_input.data_dir"), std::string::npos) << bad;
}

// Bad DPR sections are named by key.
TEST(Dpr, ConfigErrorsNameTheKey) {
  auto error_of = [](const std::string& model) {
    return zoo::testing::params_error(
        "train_input: {data_processor: DPRHDF5DataProcessor, data_dir: /d, batch_size: 4}\nmodel:\n  name: dpr\n" +
        model + "optimizer: {optimizer_type: Adam, learning_rate: 0.001}\n");
  };
  const std::string enc = kEncoder;
  std::string e = error_of("  q_encoder: " + enc + "\n");
  EXPECT_NE(e.find("give q_encoder and ctx_encoder, or encoder alone"), std::string::npos) << e;
  e = error_of("  q_encoder: " + enc + "\n  ctx_encoder: " + enc + "\n  use_biencoder: false\n");
  EXPECT_NE(e.find("model.use_biencoder"), std::string::npos) << e;
  e = error_of("  encoder: {vocab_size: 50, hidden_sise: 16}\n");
  EXPECT_NE(e.find("model.encoder.hidden_sise: unknown key"), std::string::npos) << e;
  e = error_of("  encoder: " + enc + "\n  pooler_type: max\n");
  EXPECT_NE(e.find("model.pooler_type"), std::string::npos) << e;
}
