// TensorBoard event files: every record's CRCs check out (also with Python's
// crc32c, an implementation we did not write) and the expected tags and
// steps are there for training and evaluation.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "runner/tensorboard/event_writer.h"
#include "runner/trainer.h"
#include "test_util.h"

using namespace zoo;

namespace {
std::string only_event_file(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.push_back(e.path().string());
  EXPECT_EQ(files.size(), 1u) << dir;
  return files.empty() ? "" : files[0];
}
}  // namespace

TEST(TensorBoard, TrainAndEvalEventsHoldTheExpectedScalars) {
  zoo::testing::TempDir dir;
  zoo::testing::write_small_corpus(dir / "data");
  std::string y = zoo::testing::tiny_params_yaml(dir / "data", dir / "m", "  eval_steps: 2\n");
  y.replace(y.find("log_steps: 1000"), 15, "log_steps: 2");
  y.insert(y.find("optimizer:\n") + 11, "  log_summaries: true\n  loss_scaling_factor: dynamic\n");
  Params p = params_from_node(config::load_yaml_string(y, "p.yaml"), "p.yaml", YAML::Node());
  {
    Trainer t(p, torch::kCPU, true);
    t.train(4);
    t.evaluate("after 4 steps");
  }
  std::map<std::string, std::set<int64_t>> steps;  // tag -> steps it was written at
  for (const auto& r : tensorboard::read_event_records(only_event_file(dir / "m/train"))) steps[r.tag].insert(r.step);
  for (const char* tag :
       {"loss", "lr/0", "lr/1", "local_samples_per_sec", "avg_samples_per_sec", "avg_steps_per_sec", "loss_scale",
        "model_wise_grad_norm", "params_norm/model_wise_params_norm", "per_layer_grad_norm/layer_0"})
    EXPECT_EQ(steps[tag], (std::set<int64_t>{2, 4})) << tag;
  std::map<std::string, float> eval;
  for (const auto& r : tensorboard::read_event_records(only_event_file(dir / "m/eval"))) {
    EXPECT_EQ(r.step, 4) << r.tag;
    eval[r.tag] = r.value;
  }
  EXPECT_GT(eval.count("eval/lm_perplexity"), 0u);
  EXPECT_GT(eval.count("eval/accuracy"), 0u);
  EXPECT_NEAR(std::exp(eval["loss"]), eval["eval/lm_perplexity"], 0.05 * eval["eval/lm_perplexity"]);
}

TEST(TensorBoard, RecordsCheckOutWithPythonCrc32cAndCorruptionIsCaught) {
  zoo::testing::TempDir dir;
  std::string path;
  {
    tensorboard::EventWriter w(dir / "tb");
    for (int i = 0; i < 5; ++i) w.add_scalar("x", i * 0.5, i);
    path = w.path();
  }
  if (zoo::testing::run_command("/usr/bin/python3 -c 'import crc32c'").exit_code == 0) {
    std::string script = zoo::testing::write_file(dir / "check.py", zoo::testing::oracle("tensorboard_check.py"));
    auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + path);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output, "6\n");  // file_version + 5 scalars
  }
  EXPECT_EQ(tensorboard::read_event_records(path).size(), 5u);
  std::string bytes = zoo::testing::read_file(path);
  bytes[bytes.size() - 7] ^= 0x1;
  zoo::testing::write_file(path, bytes);
  EXPECT_THROW(tensorboard::read_event_records(path), std::runtime_error);
}
