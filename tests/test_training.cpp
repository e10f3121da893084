// Training end to end on the tiny model: loss falls, checkpoints are written
// and autoloaded, resume is bit-exact, load_checkpoint_states and strictness,
// step bookkeeping, and checkpoints that Python's torch.load opens.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "runner/checkpoint/checkpoint.h"
#include "runner/checkpoint/crc32c.h"
#include "runner/trainer.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

struct Fixture {
  TempDir dir;
  Fixture() { zoo::testing::write_small_corpus(dir / "data"); }
  Params params(const std::string& extra = "") { return zoo::testing::tiny_params(dir / "data", dir / "m", extra); }
};

std::vector<torch::Tensor> weights(Trainer& t) {
  std::vector<torch::Tensor> out;
  for (const auto& p : t.model().parameters()) out.push_back(p.detach().clone());
  return out;
}

bool all_equal(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i], b[i])) return false;
  return true;
}

}  // namespace

TEST(Training, ShortRunLowersEvalLoss) {
  Fixture f;
  Trainer t(f.params("  eval_steps: 4\n"), torch::kCPU, true);
  double before = t.evaluate("init").loss;
  t.train(80);
  double after = t.evaluate("trained").loss;
  EXPECT_NEAR(before, std::log(256.0), 0.3);
  EXPECT_LT(after, before - 1.5) << "before " << before << " after " << after;
  EXPECT_EQ(t.global_step(), 80);
}

TEST(Training, CheckpointsAreSavedAndAutoloaded) {
  Fixture f;
  std::vector<torch::Tensor> trained;
  {
    Trainer t(f.params("  checkpoint_steps: 4\n"), torch::kCPU, true);
    t.train(10);
    trained = weights(t);
  }
  auto files = ckpt::list_checkpoints(f.dir / "m");
  ASSERT_EQ(files.size(), 3u);  // steps 4, 8 and the final 10
  EXPECT_EQ(files[0].step, 4);
  EXPECT_EQ(files[2].step, 10);
  Trainer resumed(f.params(), torch::kCPU, true);
  EXPECT_FALSE(all_equal(weights(resumed), trained));
  EXPECT_EQ(resumed.restore(true).value(), f.dir / "m/checkpoint_10.mdl");
  EXPECT_EQ(resumed.global_step(), 10);
  EXPECT_TRUE(all_equal(weights(resumed), trained));
}

// Stop and resume gives the same weights, bit for bit, as one uninterrupted run.
TEST(Training, ResumeIsBitExact) {
  Fixture f;
  std::vector<torch::Tensor> straight;
  {
    Trainer t(f.params(), torch::kCPU, true);
    t.train(12);
    straight = weights(t);
  }
  {
    Trainer first(f.params("  checkpoint_steps: 100\n"), torch::kCPU, true);
    first.train(5);  // checkpoints at its last step
  }
  Trainer second(f.params(), torch::kCPU, true);
  second.restore(true);
  ASSERT_EQ(second.global_step(), 5);
  second.train(7);
  EXPECT_TRUE(all_equal(weights(second), straight));
}

TEST(Training, LoadCheckpointStatesSelectsWhatIsRestored) {
  Fixture f;
  {
    Trainer t(f.params("  checkpoint_steps: 3\n"), torch::kCPU, true);
    t.train(3);
  }
  Trainer only_model(f.params("  load_checkpoint_states: model\n"), torch::kCPU, true);
  only_model.restore(true);
  EXPECT_EQ(only_model.global_step(), 0);  // fine-tuning starts counting afresh
  // A misspelt state is caught when the params are read, before any checkpoint loads.
  try {
    f.params("  load_checkpoint_states: model,optimiser\n");
    FAIL();
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("runconfig.load_checkpoint_states: unknown state 'optimiser' (did you mean "
                                         "'optimizer'?) (allowed: model, optimizer"),
              std::string::npos)
        << e.what();
  }
}

TEST(Training, ResumingWithAnotherDataOrderIsAClearError) {
  Fixture f;
  {
    Trainer t(f.params("  checkpoint_steps: 3\n"), torch::kCPU, true);  // shuffle_seed 3
    t.train(3);
  }
  auto params_with = [&](const std::string& input_line, const std::string& runconfig = "") {
    std::string y = zoo::testing::tiny_params_yaml(f.dir / "data", f.dir / "m", runconfig);
    const std::string shuffled = "  shuffle: true\n  shuffle_seed: 3\n";
    y.replace(y.find(shuffled), shuffled.size(), input_line);
    return params_from_node(config::load_yaml_string(y, "p.yaml"), "p.yaml", YAML::Node());
  };
  for (const auto& [line, expected] : std::vector<std::pair<std::string, std::string>>{
           {"  shuffle: true\n  shuffle_seed: 4\n", "made with shuffle_seed 3, this run has shuffle_seed 4"},
           {"  shuffle_seed: 3\n", "made with shuffle_seed 3, this run has no shuffling"}}) {
    Trainer other(params_with(line), torch::kCPU, true);
    try {
      other.restore(true);
      ADD_FAILURE() << "no error for " << line;
    } catch (const std::runtime_error& e) {
      std::string m = e.what();
      EXPECT_NE(
          m.find("checkpoint_3.mdl: cannot resume the training data: the checkpoint's data order was " + expected),
          std::string::npos)
          << m;
    }
  }
  // Another number of data-parallel tasks (WORLD_SIZE): a map-style stream is
  // the same at any world size (Distributed.* trains through it); a processor
  // that shards whole files refuses (Hdf5Iterable.DataParallelTasksReadDisjointFileShards).
  // Leaving the data position out starts the data afresh, without complaint.
  Trainer fresh_data(
      params_with("  shuffle: true\n  shuffle_seed: 4\n", "  load_checkpoint_states: model,optimizer,global_step\n"),
      torch::kCPU, true);
  fresh_data.restore(true);
  EXPECT_EQ(fresh_data.global_step(), 3);
  // The same seed resumes.
  Trainer same(params_with("  shuffle: true\n  shuffle_seed: 3\n"), torch::kCPU, true);
  same.restore(true);
  EXPECT_EQ(same.global_step(), 3);
}

TEST(Training, StrictLoadingReportsMismatchedKeys) {
  Fixture f;
  {
    Trainer t(f.params("  checkpoint_steps: 2\n"), torch::kCPU, true);
    t.train(2);
  }
  // Untied output layer: the checkpoint lacks lm_head.weight.
  std::string yaml = zoo::testing::tiny_params_yaml(f.dir / "data", f.dir / "m");
  yaml.insert(yaml.find("  dropout_rate"), "  share_embedding_weights: false\n");
  auto load = [&](const std::string& extra) {
    Params p = params_from_node(config::load_yaml_string(yaml + extra, "p.yaml"), "p.yaml", YAML::Node());
    Trainer t(p, torch::kCPU, true);
    t.restore(true);
    return t.global_step();
  };
  try {
    load("");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing model keys: lm_head.weight"), std::string::npos) << e.what();
  }
  // Non-strict: what matches is loaded; the optimizer state (for other
  // parameters) cannot be, and says how to skip it.
  try {
    load("  disable_strict_checkpoint_loading: true\n");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("load_checkpoint_states"), std::string::npos) << e.what();
  }
  EXPECT_EQ(load("  disable_strict_checkpoint_loading: true\n  load_checkpoint_states: model,global_step\n"), 2);
}

TEST(Training, StepPlanFollowsModelzooRules) {
  Fixture f;
  Trainer t(f.params("  max_steps: 10\n"), torch::kCPU, true);
  EXPECT_EQ(t.planned_steps(std::nullopt), 10);
  EXPECT_EQ(t.planned_steps(4), 4);
  t.train(10);
  EXPECT_THROW(t.planned_steps(4), std::runtime_error);  // max_steps reached
  Trainer epochs(f.params("  num_epochs: 2\n"), torch::kCPU, true);
  EXPECT_EQ(epochs.planned_steps(std::nullopt), 2 * epochs.steps_per_epoch());
  Trainer none(f.params(), torch::kCPU, true);
  EXPECT_THROW(none.planned_steps(std::nullopt), std::runtime_error);
}

TEST(Training, MaxCheckpointsKeepsTheNewest) {
  Fixture f;
  Trainer t(f.params("  checkpoint_steps: 1\n  max_checkpoints: 2\n"), torch::kCPU, true);
  t.train(5);
  auto files = ckpt::list_checkpoints(f.dir / "m");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].step, 4);
  EXPECT_EQ(files[1].step, 5);
  // Saving again at the same step never overwrites: a timestamped name is used.
  std::string again = t.save_checkpoint();
  EXPECT_NE(again, f.dir / "m/checkpoint_5.mdl");
  EXPECT_EQ(ckpt::list_checkpoints(f.dir / "m").back().path, again);
}

TEST(Training, CorruptOrTruncatedCheckpointsAreCaught) {
  Fixture f;
  {
    Trainer t(f.params("  checkpoint_steps: 3\n"), torch::kCPU, true);
    t.train(6);
  }
  const std::string good = f.dir / "m/checkpoint_3.mdl", newest = f.dir / "m/checkpoint_6.mdl";
  std::string bytes = zoo::testing::read_file(newest);
  // Truncated: a clear error naming the file.
  zoo::testing::write_file(newest, bytes.substr(0, bytes.size() / 2));
  try {
    ckpt::load_checkpoint_file(newest);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(newest + ": not a readable zoo checkpoint"), std::string::npos) << e.what();
  }
  // Autoload skips it and resumes from the previous good one.
  Trainer resumed(f.params(), torch::kCPU, true);
  EXPECT_EQ(resumed.restore(true).value(), good);
  EXPECT_EQ(resumed.global_step(), 3);
  // A flipped byte inside the tensor data fails the checksum.
  std::string flipped = zoo::testing::read_file(good);
  size_t at = flipped.find("data/0");  // first tensor record of the zip archive
  ASSERT_NE(at, std::string::npos);
  flipped[at + 200] ^= 0x10;
  zoo::testing::write_file(newest, flipped);
  try {
    ckpt::load_checkpoint_file(newest);
    FAIL() << "corruption not detected";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(newest), std::string::npos) << e.what();
  }
  // When nothing is readable, training does not silently start over.
  zoo::testing::write_file(good, "garbage");
  Trainer none(f.params(), torch::kCPU, true);
  EXPECT_THROW(none.restore(true), std::runtime_error);
}

TEST(Training, PythonTorchLoadOpensCheckpoints) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  Fixture f;
  Trainer t(f.params("  checkpoint_steps: 3\n"), torch::kCPU, true);
  t.train(3);
  auto r = zoo::testing::run_command(
      "/usr/bin/python3 -c \"import torch; d = torch.load('" + (f.dir / "m/checkpoint_3.mdl") +
      "'); assert d['global_step'] == 3; assert d['model']['model.embedding_layer.word_embeddings.weight'].shape == "
      "(256, 32); assert len(d['optimizer']['param_groups']) == 2; assert d['__metadata__'][0]['model_name'] == "
      "'gpt2'; print('ok')\"");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// The checkpoint checksum is summed in pieces on several threads; combining
// the pieces' CRCs must equal one pass over the whole (the check value of
// "123456789" pins the variant), for any split.
TEST(Training, Crc32cOfPiecesCombinesToTheWhole) {
  EXPECT_EQ(crc32c_extend(0, "123456789", 9), 0xE3069283u);
  std::string data(100000, '\0');
  uint32_t seed = 1;
  for (char& c : data) c = static_cast<char>((seed = seed * 1103515245u + 12345u) >> 24);
  const uint32_t whole = crc32c_extend(0, data.data(), data.size());
  for (size_t split : {size_t{0}, size_t{1}, size_t{4095}, size_t{65536}, data.size() - 1, data.size()}) {
    const uint32_t a = crc32c_extend(0, data.data(), split);
    const uint32_t b = crc32c_extend(0, data.data() + split, data.size() - split);
    EXPECT_EQ(crc32c_combine(a, b, data.size() - split), whole) << "split at " << split;
  }
}

// A write that fails part way (here the file-size limit, as a full disk
// would) is an error naming the file and the reason; the half-written .tmp
// is removed and the checkpoint already there is untouched.
TEST(Training, FailedCheckpointWriteLeavesNothingBehind) {
  TempDir dir;
  const std::string path = dir / "checkpoint_1.mdl";
  zoo::testing::write_file(path, "the previous checkpoint");
  pid_t child = fork();
  if (child == 0) {  // the limit and its signal stay in this process
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = {size_t{1} << 20, size_t{1} << 20};
    setrlimit(RLIMIT_FSIZE, &limit);
    c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
    d.insert("big", torch::ones({4'000'000}));  // 16 MB
    int code = 1;
    try {
      ckpt::save_checkpoint_file(path, d);
    } catch (const std::runtime_error& e) {
      const std::string m = e.what();
      code = m.find(path) != std::string::npos && m.find("write failed (File too large)") != std::string::npos ? 0 : 2;
    }
    _exit(code);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: no error, 2: the message lacks the path or reason";
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(zoo::testing::read_file(path), "the previous checkpoint");
}

// Checkpoints bigger than the two 32 MiB write buffers, with tensors of odd
// byte counts and a non-contiguous one, come back bit for bit, and Python's
// torch.load reads the same values.
TEST(Training, LargeCheckpointRoundTripsExactly) {
  zoo::testing::TempDir dir;
  torch::manual_seed(5);
  c10::impl::GenericDict model(c10::StringType::get(), c10::TensorType::get());
  model.insert("big", torch::randn({9'000'001}));  // ~36 MB, not a whole number of blocks
  model.insert("odd", torch::randn({7, 13}, torch::kDouble));
  model.insert("strided", torch::randn({3000, 3001}).t());  // ~36 MB, transposed view
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("model", model);
  d.insert("global_step", int64_t{7});
  const std::string path = dir / "checkpoint_7.mdl";
  ckpt::save_checkpoint_file(path, d);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  c10::impl::GenericDict back = ckpt::load_checkpoint_file(path);
  auto loaded = back.at("model").toGenericDict();
  for (const char* k : {"big", "odd", "strided"})
    EXPECT_TRUE(torch::equal(loaded.at(k).toTensor(), model.at(k).toTensor())) << k;
  {  // one flipped byte inside "big" fails the checksum
    const std::string bad = dir / "checkpoint_8.mdl";
    std::filesystem::copy_file(path, bad);
    std::fstream f(bad, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(18'000'000);
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x10);
    f.seekp(18'000'000);
    f.write(&c, 1);
    f.close();
    try {
      ckpt::load_checkpoint_file(bad);
      ADD_FAILURE() << "a corrupt checkpoint loaded";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
    }
  }
  {  // Loaded tensors are the file's pages mapped copy-on-write: writing one
     // leaves the file as it was, and a checkpoint saved over the same name
     // (by rename) leaves tensors still mapped from the old file intact.
    torch::Tensor big = loaded.at("big").toTensor();
    big.mul_(2);
    c10::impl::GenericDict again = ckpt::load_checkpoint_file(path);
    EXPECT_TRUE(torch::equal(again.at("model").toGenericDict().at("big").toTensor(), model.at("big").toTensor()));
    c10::impl::GenericDict other(c10::StringType::get(), c10::AnyType::get());
    other.insert("model", c10::impl::GenericDict(c10::StringType::get(), c10::TensorType::get()));
    ckpt::save_checkpoint_file(path, other);
    EXPECT_TRUE(torch::equal(big, model.at("big").toTensor() * 2));
    EXPECT_TRUE(torch::equal(loaded.at("odd").toTensor(), model.at("odd").toTensor()));
    ckpt::save_checkpoint_file(path, d);
  }
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  {  // Records compressed by a zip tool are read through the decompressor, not mapped as they lie.
    const std::string deflated = dir / "deflated.mdl";
    auto z = zoo::testing::run_command(
        "/usr/bin/python3 -c \"import sys, zipfile; src = zipfile.ZipFile(sys.argv[1]); "
        "dst = zipfile.ZipFile(sys.argv[2], 'w', zipfile.ZIP_DEFLATED); "
        "[dst.writestr(i.filename, src.read(i.filename)) for i in src.infolist()]; dst.close()\" " +
        path + " " + deflated);
    ASSERT_EQ(z.exit_code, 0) << z.output;
    c10::impl::GenericDict back_deflated = ckpt::load_checkpoint_file(deflated);
    for (const char* k : {"big", "odd", "strided"})
      EXPECT_TRUE(torch::equal(back_deflated.at("model").toGenericDict().at(k).toTensor(), model.at(k).toTensor()))
          << k;
  }
  auto r = zoo::testing::run_command("/usr/bin/python3 -c \"import torch; m = torch.load('" + path +
                                     "')['model']; print(repr(float(m['strided'][1234].double().sum())))\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const double expected = model.at("strided").toTensor()[1234].to(torch::kDouble).sum().item<double>();
  EXPECT_NEAR(std::stod(r.output), expected, 1e-9 * std::max(1.0, std::abs(expected)));
}

// The zoo binary end to end: train_and_eval, then a rerun resumes.
TEST(Training, BinaryTrainsEvaluatesAndResumes) {
  Fixture f;
  std::string yaml = zoo::testing::tiny_params_yaml(
      f.dir / "data", f.dir / "m", "  num_steps: 6\n  eval_frequency: 3\n  checkpoint_steps: 3\n  eval_steps: 2\n");
  yaml.replace(yaml.find("log_steps: 1000"), 15, "log_steps: 3");
  std::string params = zoo::testing::write_file(f.dir / "p.yaml", yaml);
  std::string cmd = zoo::testing::zoo_binary() + " CPU --params " + params + " --mode train_and_eval";
  auto r = zoo::testing::run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("| Train Device=cpu, Step=3, Loss="), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Avg Eval Loss:"), std::string::npos);
  EXPECT_NE(r.output.find("Training completed successfully!"), std::string::npos);
  r = zoo::testing::run_command(cmd);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Loading checkpoint " + (f.dir / "m/checkpoint_6.mdl")), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Step=12,"), std::string::npos) << r.output;
  r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params + " --mode eval_all");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::string csv = zoo::testing::read_file(f.dir / "m/eval/results.csv");
  EXPECT_NE(csv.find((f.dir / "m/checkpoint_12.mdl") + ",12,"), std::string::npos) << csv;
}

// train_and_eval evaluates every eval_frequency steps and at the end; eval_all
// evaluates each checkpoint at its own global_step.
TEST(Training, TrainAndEvalAndEvalAllBookkeeping) {
  Fixture f;
  std::string params = zoo::testing::write_file(
      f.dir / "p.yaml", zoo::testing::tiny_params_yaml(f.dir / "data", f.dir / "m",
                                                       "  num_steps: 5\n  eval_frequency: 2\n  checkpoint_steps: 2\n"
                                                       "  eval_steps: 1\n"));
  const std::string zoo = zoo::testing::zoo_binary() + " CPU --params " + params;
  ASSERT_EQ(zoo::testing::run_command(zoo + " --mode train_and_eval").exit_code, 0);
  auto steps_in_results = [&] {
    std::vector<int64_t> steps;
    std::istringstream csv(zoo::testing::read_file(f.dir / "m/eval/results.csv"));
    std::string line;
    std::getline(csv, line);  // header
    while (std::getline(csv, line)) steps.push_back(std::stoll(line.substr(line.find(',') + 1)));
    return steps;
  };
  EXPECT_EQ(steps_in_results(), (std::vector<int64_t>{2, 4, 5}));
  std::vector<int64_t> saved;
  for (const auto& c : ckpt::list_checkpoints(f.dir / "m")) saved.push_back(c.step);
  EXPECT_EQ(saved, (std::vector<int64_t>{2, 4, 5}));
  auto r = zoo::testing::run_command(zoo + " --mode eval_all");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(steps_in_results(), (std::vector<int64_t>{2, 4, 5, 2, 4, 5}));
  r = zoo::testing::run_command(zoo + " --mode eval_all --checkpoint_path " + (f.dir / "m/checkpoint_2.mdl"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--checkpoint_path cannot be used with --mode eval_all"), std::string::npos) << r.output;
  r = zoo::testing::run_command(zoo + " --mode eval_all -o " + (f.dir / "empty"));
  EXPECT_NE(r.output.find("eval_all: no checkpoint files named as checkpoint_{step}.mdl in"), std::string::npos)
      << r.output;
  // num_epochs: one epoch then an eval, each time.
  std::string epochs = zoo::testing::write_file(
      f.dir / "e.yaml",
      zoo::testing::tiny_params_yaml(f.dir / "data", f.dir / "e", "  num_epochs: 2\n  eval_steps: 1\n"));
  ASSERT_EQ(zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + epochs + " --mode train_and_eval")
                .exit_code,
            0);
  std::string csv = zoo::testing::read_file(f.dir / "e/eval/results.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;  // header + 2 evals
}

namespace {
pid_t spawn_zoo(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* out = freopen(log.c_str(), "w", stdout);
    (void)out;
    dup2(fileno(stdout), fileno(stderr));
    std::vector<char*> argv;
    std::string bin = zoo::testing::zoo_binary();
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}
}  // namespace

// SIGKILL mid-run (during a step or a checkpoint write) loses nothing: the
// rerun resumes from the last complete checkpoint and ends bitwise equal to
// an uninterrupted run.
TEST(Training, SurvivesSigkillAndEndsBitwiseEqual) {
  Fixture f;
  auto params_for = [&](const std::string& name) {
    std::string y =
        zoo::testing::tiny_params_yaml(f.dir / "data", f.dir / name, "  max_steps: 40\n  checkpoint_steps: 1\n");
    return zoo::testing::write_file(f.dir / (name + ".yaml"), y);
  };
  const std::string straight = params_for("straight"), killed = params_for("killed");
  auto run_to_end = [&](const std::string& params, const std::string& log) {
    int status = 0;
    waitpid(spawn_zoo({"CPU", "--params", params, "--mode", "train"}, log), &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  ASSERT_EQ(run_to_end(straight, f.dir / "straight.log"), 0);
  // Kill twice at different points, then let it finish.
  for (int target : {8, 21}) {
    pid_t pid = spawn_zoo({"CPU", "--params", killed, "--mode", "train"}, f.dir / "killed.log");
    const std::string marker = f.dir / ("killed/checkpoint_" + std::to_string(target) + ".mdl");
    for (int i = 0; i < 3000 && !std::filesystem::exists(marker); ++i) usleep(2000);
    usleep(3000 * (target % 5));  // somewhere in the next step or checkpoint write
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  ASSERT_EQ(run_to_end(killed, f.dir / "resumed.log"), 0) << zoo::testing::read_file(f.dir / "resumed.log");
  EXPECT_NE(zoo::testing::read_file(f.dir / "resumed.log").find("Loading checkpoint"), std::string::npos);
  auto a = ckpt::load_checkpoint_file(f.dir / "straight/checkpoint_40.mdl");
  auto b = ckpt::load_checkpoint_file(f.dir / "killed/checkpoint_40.mdl");
  for (const auto& kv : a.at("model").toGenericDict())
    EXPECT_TRUE(torch::equal(kv.value().toTensor(), b.at("model").toGenericDict().at(kv.key()).toTensor()))
        << kv.key().toStringRef();
  auto sa = a.at("optimizer").toGenericDict().at("state").toGenericDict();
  auto sb = b.at("optimizer").toGenericDict().at("state").toGenericDict();
  ASSERT_EQ(sa.size(), sb.size());
  for (const auto& kv : sa)
    for (const auto& e : kv.value().toGenericDict())
      EXPECT_TRUE(torch::equal(e.value().toTensor(), sb.at(kv.key()).toGenericDict().at(e.key()).toTensor()));
  // What a user runs in CI says so too: every entry (weights, optimizer, scheduler, data and RNG state) equal.
  const auto diff =
      zoo::testing::run_command(zoo::testing::zoo_binary() + " checkpoint diff --exact " +
                                f.dir / "straight/checkpoint_40.mdl " + f.dir / "killed/checkpoint_40.mdl");
  EXPECT_EQ(diff.exit_code, 0) << diff.output;
  EXPECT_NE(diff.output.find("The checkpoints are equal.\n"), std::string::npos) << diff.output;
}
