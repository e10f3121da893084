// Faults a hostile user finds: each bad input ends in an error naming the file
// and the key, line or sample, or is handled as the README says; a run is
// never silently wrong, never hangs, and loses nothing the user had.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "runner/checkpoint/checkpoint.h"
#include "runner/trainer.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::run_command;
using zoo::testing::TempDir;

namespace {

using zoo::testing::eval_loss;
using zoo::testing::line_of;
using zoo::testing::params_error;
using zoo::testing::TinyRun;

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

}  // namespace

// Python torch.save files hold weights alone: they load as model weights, and
// a file that holds none (or none that match) is an error, not a warning
// followed by an evaluation of the untrained model.
TEST(Reliability, TorchSaveStateDictsLoadAsWeightsAndNothingLoadedIsAnError) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  TinyRun run("  checkpoint_steps: 6\n  eval_steps: 2\n");
  ASSERT_EQ(run.zoo("--mode train --max_steps 6").exit_code, 0);
  const std::string script = zoo::testing::write_file(run.dir / "save.py", zoo::testing::oracle("reliability_save.py"));
  ASSERT_EQ(run_command("/usr/bin/python3 " + script + " " + run.dir.path()).exit_code, 0);

  const double trained = eval_loss(run.zoo("--mode eval --checkpoint_path " + (run.dir / "m/checkpoint_6.mdl")).output);
  const double untrained = eval_loss(run.zoo("--mode eval -o " + (run.dir / "fresh")).output);
  ASSERT_GT(std::abs(trained - untrained), 1e-3);
  for (const char* file : {"plain.pt", "prefixed.pt", "module_state_dict.pt"}) {
    auto r = run.zoo("--mode eval --checkpoint_path " + (run.dir / file));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(eval_loss(r.output), trained) << file << "\n" << r.output;
  }
  auto r = run.zoo("--mode eval --checkpoint_path " + (run.dir / "nested.pt"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(
      r.output.find("nested.pt: holds no model weights (no 'model' state dict; its top-level keys: state_dict, epoch)"),
      std::string::npos)
      << r.output;
  EXPECT_TRUE(std::isnan(eval_loss(r.output))) << r.output;
  for (const char* mode : {"eval", "train --disable_strict_checkpoint_loading"}) {
    r = run.zoo(std::string("--mode ") + mode + " --max_steps 8 --checkpoint_path " + (run.dir / "renamed.pt"));
    EXPECT_EQ(r.exit_code, 1) << mode;
    EXPECT_NE(r.output.find("renamed.pt: none of the checkpoint's 36 model keys matches the model"), std::string::npos)
        << mode << "\n"
        << r.output;
  }

  // Found by autoload as the newest checkpoint_6.mdl: training goes on from
  // step 6 instead of restarting at 0 and writing timestamped duplicates.
  std::filesystem::create_directories(run.dir / "m2");
  std::filesystem::copy_file(run.dir / "plain.pt", run.dir / "m2/checkpoint_6.mdl");
  r = run.zoo("--mode train --max_steps 8 -o " + (run.dir / "m2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("no global_step in the file; taking 6 from its name"), std::string::npos) << r.output;
  std::vector<int64_t> steps;
  for (const auto& c : ckpt::list_checkpoints(run.dir / "m2")) {
    steps.push_back(c.step);
    EXPECT_EQ(c.timestamp, "");
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{6, 8}));
}

// YAML keeps one of two equal keys without a word; zoo names both lines.
TEST(Reliability, DuplicateKeysAnywhereAndKeysThatAreNotNamesAreErrors) {
  const std::string base = zoo::testing::tiny_params_yaml("/d", "/m");
  std::string y = base + "eval_input:\n  batch_size: 2\n";
  EXPECT_NE(params_error(y).find("p.yaml:" + line_of(y, "eval_input:\n  batch_size: 2") +
                                 ":1: eval_input: duplicate key (first given at line " + line_of(y, "eval_input:") +
                                 " with another value;"),
            std::string::npos)
      << params_error(y);
  // A stray section line splits the optimizer: what follows it was silently dropped.
  y = replaced(base, "  max_gradient_norm: 1.0\n", "optimizer:\n  max_gradient_norm: 1.0\n");
  EXPECT_NE(params_error(y).find(":1: optimizer: duplicate key"), std::string::npos) << params_error(y);
  y = replaced(base, "total_iters: 10}", "total_iters: 10, end_learning_rate: 0.5}");
  EXPECT_NE(params_error(y).find("optimizer.learning_rate.0.end_learning_rate: duplicate key"), std::string::npos)
      << params_error(y);
  y = replaced(base, "  hidden_size: 32\n", "  hidden_size: 32\n  [a, b]: 1\n");
  EXPECT_NE(params_error(y).find("p.yaml:" + line_of(y, "[a, b]") +
                                 ":3: model: found a list where a key belongs; expected `key: value`"),
            std::string::npos)
      << params_error(y);
  y = replaced(base, "  hidden_size: 32\n", "  hidden_size: 32\n  ? {a: 1}\n  : 2\n");
  EXPECT_NE(params_error(y).find("model: found a mapping where a key belongs"), std::string::npos) << params_error(y);
  // A key repeated with the same value (modelzoo's Cerebras_GPT_256m_mup.yaml
  // repeats `a: -0.16` in an initializer) loses nothing: a warning naming
  // both lines, and the file reads as with one copy.
  y = replaced(base, "  hidden_size: 32\n", "  hidden_size: 32\n  hidden_size: 32\n");
  std::vector<std::string> warnings;
  Params p = params_from_node(config::load_yaml_string(y, "p.yaml", &warnings), "p.yaml", YAML::Node());
  EXPECT_EQ(p.resolved()["model"]["hidden_size"].as<int>(), 32);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("p.yaml:" + std::to_string(std::stoi(line_of(y, "  hidden_size: 32")) + 1) +
                             ":16: model.hidden_size: repeats the key of line " + line_of(y, "  hidden_size: 32") +
                             " with the same value"),
            std::string::npos)
      << warnings[0];
}

// Values no one can mean: refused when the params are read, naming the key.
TEST(Reliability, SettingsThatCannotBeMeantAreRefused) {
  const std::string base = zoo::testing::tiny_params_yaml("/d", "/m");
  auto lr = [&](const std::string& learning_rate) {
    return params_error(replaced(
        base, base.substr(base.find("  learning_rate:\n"), base.find("runconfig:") - base.find("  learning_rate:\n")),
        "  learning_rate: " + learning_rate + "\n"));
  };
  EXPECT_NE(lr("-0.001").find("optimizer.learning_rate: expected a value >= 0"), std::string::npos) << lr("-0.001");
  EXPECT_NE(lr("{scheduler: Linear, initial_learning_rate: 0.1, end_learning_rate: -0.1, total_iters: 5}")
                .find("optimizer.learning_rate.end_learning_rate: expected a value >= 0"),
            std::string::npos);
  EXPECT_NE(lr("{scheduler: PiecewiseConstant, learning_rates: [0.1, -0.01], milestones: [5]}")
                .find("optimizer.learning_rate.learning_rates: expected values >= 0"),
            std::string::npos);
  std::string y = replaced(base, "  max_gradient_norm: 1.0\n",
                           "  max_gradient_norm: 1.0\n  loss_scaling_factor: dynamic\n  min_loss_scale: 100.0\n"
                           "  max_loss_scale: 10.0\n");
  EXPECT_NE(params_error(y).find("p.yaml:" + line_of(y, "min_loss_scale") +
                                 ":19: optimizer.min_loss_scale: min_loss_scale (100) is above max_loss_scale (10)"),
            std::string::npos)
      << params_error(y);
  // Samples longer than the model's positions: known from the params alone.
  y = replaced(base, "max_position_embeddings: 32", "max_position_embeddings: 16");
  EXPECT_NE(params_error(y).find("p.yaml:" + line_of(y, "max_sequence_length") +
                                 ":24: train_input.max_sequence_length: 32 tokens per sample, more than "
                                 "model.max_position_embeddings 16 (p.yaml:" +
                                 line_of(y, "max_position_embeddings") + ":28)"),
            std::string::npos)
      << params_error(y);
  // How long to train and when to evaluate: said before the model is built, naming the file.
  TempDir dir;
  const std::string file = zoo::testing::write_file(dir / "steps.yaml", base);
  auto validate = [&](const std::string& mode) {
    return zoo::testing::run_in_process({"CPU", "--params", file, "--mode", mode, "--validate_only"}).error;
  };
  EXPECT_NE(validate("train").find(file + ": runconfig: set one of num_steps, num_epochs or max_steps"),
            std::string::npos)
      << validate("train");
  zoo::testing::write_file(file, base + "  max_steps: 10\n");
  EXPECT_NE(validate("train_and_eval").find(file + ": runconfig.eval_frequency: required for train_and_eval"),
            std::string::npos)
      << validate("train_and_eval");
  EXPECT_EQ(validate("train"), "");
}

// eval_steps beyond the eval data would count samples over and over: zoo
// evaluates one full pass and says so.
TEST(Reliability, EvalStepsBeyondTheDataEvaluateOnePass) {
  TinyRun run;
  Trainer whole(zoo::testing::tiny_params(run.dir / "data", run.dir / "m"), torch::kCPU, false);
  const EvalResult pass = whole.evaluate("init");
  Trainer beyond(zoo::testing::tiny_params(run.dir / "data", run.dir / "m", "  eval_steps: 100000\n"), torch::kCPU,
                 false);
  const EvalResult capped = beyond.evaluate("init");
  EXPECT_EQ(capped.samples, pass.samples);
  EXPECT_DOUBLE_EQ(capped.loss, pass.loss);
  auto r = run.zoo("--mode eval --eval_steps 100000");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("p.yaml: runconfig.eval_steps (100000) is more than the"), std::string::npos) << r.output;
}

// Loss masks, labels and row layouts that cannot be meant, named by file and
// sample; uncounted padding labels such as -100 are fine.
TEST(Reliability, Hdf5SamplesThatCannotBeMeantNameTheFileAndSample) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  const std::string script = zoo::testing::write_file(dir / "write.py", zoo::testing::oracle("reliability_write.py"));
  ASSERT_EQ(run_command("/usr/bin/python3 " + script + " " + dir.path()).exit_code, 0);
  auto first_batch = [&](const std::string& name) -> std::string {
    try {
      auto loader = zoo::testing::open_loader(
          "{data_processor: GptHDF5MapDataProcessor, batch_size: 4, data_dir: " + (dir / name) + "}");
      loader->check_token_ids(256);
      models::Features batch = loader->next();
      EXPECT_EQ(batch.at("labels").narrow(1, 0, 4).abs().sum().item<int64_t>(), 0) << name;  // -100 -> 0, uncounted
      return "no error";
    } catch (const std::exception& e) {
      return e.what();
    }
  };
  const auto file = [&](const std::string& name) { return (dir / name) + "/d.h5"; };
  EXPECT_NE(first_batch("rows4").find(file("rows4") + ": dataset 'data' has shape (8, 4, 16), expected (n, 3, msl)"),
            std::string::npos)
      << first_batch("rows4");
  EXPECT_NE(first_batch("lzf").find(file("lzf") + ": dataset 'data' is compressed with lzf"), std::string::npos)
      << first_batch("lzf");
  EXPECT_NE(first_batch("mask_minus_one")
                .find(file("mask_minus_one") + ", sample 2: attention_mask (the loss mask) is -1 at position 7, "
                                               "expected 0 or 1"),
            std::string::npos)
      << first_batch("mask_minus_one");
  EXPECT_NE(first_batch("mask_all_zero")
                .find(file("mask_all_zero") + ", sample 0 and the rest of its batch of 4: every "
                                              "attention_mask (loss mask) value is 0"),
            std::string::npos)
      << first_batch("mask_all_zero");
  EXPECT_NE(first_batch("negative_label")
                .find(file("negative_label") + ", sample 3: token id -1 in labels at position 5 is negative"),
            std::string::npos)
      << first_batch("negative_label");
  EXPECT_EQ(first_batch("padding_labels"), "no error");

  // Samples longer than the model's positions, the length given by the files
  // alone: refused when the data opens, before the first step.
  const std::string y =
      replaced(zoo::testing::tiny_params_yaml(dir.path(), dir / "m"),
               "ByteTextDataProcessor\n  data_dir: " + dir.path() + "/train\n  max_sequence_length: 32",
               "GptHDF5MapDataProcessor\n  data_dir: " + (dir / "long"));
  try {
    Trainer t(params_from_node(config::load_yaml_string(y, "p.yaml"), "p.yaml", YAML::Node()), torch::kCPU, true);
    ADD_FAILURE() << "no error for 64-token samples and max_position_embeddings 32";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(file("long") + ": samples of 64 tokens, more than "
                                                        "model.max_position_embeddings 32 in p.yaml (train_input)"),
              std::string::npos)
        << e.what();
  }
}

// One bad file in model_dir does not hide the good ones after it.
TEST(Reliability, EvalAllReportsBadCheckpointsAndEvaluatesTheRest) {
  TinyRun run("  checkpoint_steps: 5\n  eval_steps: 2\n");
  ASSERT_EQ(run.zoo("--mode train --max_steps 10").exit_code, 0);
  const std::string m = run.dir / "m";
  zoo::testing::write_file(m + "/checkpoint_7.mdl", "");
  const std::string whole = zoo::testing::read_file(m + "/checkpoint_10.mdl");
  zoo::testing::write_file(m + "/checkpoint_8.mdl", whole.substr(0, whole.size() / 2));
  std::filesystem::copy_file(m + "/checkpoint_10.mdl", m + "/checkpoint_99999999999999999999999.mdl");
  auto r = run.zoo("--mode eval_all");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(m + "/checkpoint_7.mdl: is empty"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("eval_all: 2 of 4 checkpoints could not be evaluated (see the errors above): " + m +
                          "/checkpoint_7.mdl, " + m + "/checkpoint_8.mdl"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("checkpoint_99999999999999999999999.mdl: ignored; its step number does not fit in 64 bits"),
            std::string::npos)
      << r.output;
  const std::string csv = zoo::testing::read_file(m + "/eval/results.csv");
  EXPECT_NE(csv.find(m + "/checkpoint_5.mdl,5,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(m + "/checkpoint_10.mdl,10,"), std::string::npos) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;  // header + 2 rows
}

// More reader threads than the process may start: an error naming the key, not a hang.
TEST(Reliability, ReaderThreadsThatCannotStartAreAnErrorNotAHang) {
  TinyRun run;
  const std::string params = zoo::testing::write_file(
      run.dir / "workers.yaml", replaced(zoo::testing::read_file(run.params), "  batch_size: 8\n  shuffle: true\n",
                                         "  batch_size: 8\n  num_workers: 5000\n  shuffle: true\n"));
  auto r = run_command("ulimit -s 8192 && ulimit -v 4000000 && timeout 120 " + zoo::testing::zoo_binary() +
                       " CPU --params " + params + " --mode train --max_steps 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("workers.yaml:" + line_of(zoo::testing::read_file(params), "num_workers") +
                          ":16: train_input.num_workers: cannot start 5000 reader threads ("),
            std::string::npos)
      << r.output;
}

// A full disk (here: a file-size limit) stops the run log and TensorBoard
// files with a warning naming each; training itself goes on to the end. The
// limit (16 KiB) lets the resolved params_train.yaml (over 8 KiB, every
// declared key with its default) be written; 300 steps logged each step
// outgrow it.
TEST(Reliability, LogAndEventFilesThatCannotBeWrittenAreReportedAndTheRunGoesOn) {
  TinyRun run;
  zoo::testing::write_file(run.params,
                           replaced(zoo::testing::read_file(run.params), "log_steps: 1000", "log_steps: 1"));
  auto r = run_command("trap '' XFSZ && ulimit -f 16 && " + zoo::testing::zoo_binary() + " CPU --params " + run.params +
                       " --mode train --max_steps 300");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(
      std::regex_search(r.output, std::regex("WARNING:  " + run.dir.path() +
                                             "/m/train/events\\.out\\.tfevents\\.[^ ]+: cannot write TensorBoard "
                                             "events \\(File too large\\); the run goes on")))
      << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("WARNING:  cannot write the run log " + run.dir.path() +
                                                     "/m/zoo_logs/run_train_[0-9_]+\\.log \\(File too large\\)")))
      << r.output;
  EXPECT_NE(r.output.find("Training completed successfully!"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Step=300, Loss="), std::string::npos) << r.output;
}
