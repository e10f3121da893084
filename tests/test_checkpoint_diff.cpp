// `zoo checkpoint diff`: a run stopped and resumed equals the run that went
// straight through (exit 0); one more step differs, with each tensor's
// largest difference and mean squared error as torch computes them (exit 1).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <regex>

#include "test_util.h"

using namespace zoo;
using zoo::testing::run_command;
using zoo::testing::TempDir;

namespace {

struct Runs {
  TempDir dir;
  std::string params;
  Runs() {
    zoo::testing::write_small_corpus(dir / "data");
    params = zoo::testing::write_file(
        dir / "p.yaml", zoo::testing::tiny_params_yaml(dir / "data", dir / "straight", "  checkpoint_steps: 3\n"));
  }
  zoo::testing::CommandResult zoo(const std::string& args) const {
    return run_command(zoo::testing::zoo_binary() + " " + args);
  }
};

}  // namespace

TEST(CheckpointDiff, AResumedRunEqualsTheStraightOneAndAStepLaterDiffersAsTorchComputes) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  Runs runs;
  const std::string d = runs.dir.path();
  ASSERT_EQ(runs.zoo("CPU --params " + runs.params + " --mode train --max_steps 6").exit_code, 0);
  ASSERT_EQ(
      runs.zoo("CPU --params " + runs.params + " --mode train --max_steps 3 --model_dir " + d + "/resumed").exit_code,
      0);
  ASSERT_EQ(
      runs.zoo("CPU --params " + runs.params + " --mode train --max_steps 6 --model_dir " + d + "/resumed").exit_code,
      0);

  auto r = runs.zoo("checkpoint diff " + d + "/straight/checkpoint_6.mdl " + d + "/resumed/checkpoint_6.mdl");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("The checkpoints are equal.\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" 0 differ, 0 of another shape or dtype, 0 only in A, 0 only in B"), std::string::npos)
      << r.output;
  // The params (in __metadata__) name each run's model_dir: they differ when asked to compare them.
  r = runs.zoo("checkpoint diff --metadata " + d + "/straight/checkpoint_6.mdl " + d + "/resumed/checkpoint_6.mdl");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("__metadata__.0.params: differs"), std::string::npos) << r.output;

  // Three steps apart: the weights moved (some within the tolerance: a key bias's gradient is all but zero), the
  // step too; the figures are torch's on the same files.
  const std::string a = d + "/straight/checkpoint_3.mdl", b = d + "/straight/checkpoint_6.mdl";
  r = runs.zoo("checkpoint diff " + a + " " + b);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("  global_step: differs, 3 vs 6\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("The checkpoints differ.\n"), std::string::npos) << r.output;
  const std::string oracle = zoo::testing::write_file(d + "/mse.py", zoo::testing::oracle("checkpoint_diff_mse.py"));
  const auto py = run_command("/usr/bin/python3 " + oracle + " " + a + " " + b);
  ASSERT_EQ(py.exit_code, 0) << py.output;
  const nlohmann::json reference = nlohmann::json::parse(py.output);
  ASSERT_GT(reference.size(), 10u);
  for (const auto& [name, figures] : reference.items()) {
    std::smatch m;
    const std::regex line("  " + std::regex_replace(name, std::regex(R"([.])"), R"(\.)") +
                          R"(: (?:differs|close), max \|a-b\| ([0-9.e+-]+), mse ([0-9.e+-]+)\n)");
    ASSERT_TRUE(std::regex_search(r.output, m, line)) << name << "\n" << r.output;
    EXPECT_NEAR(std::stod(m[1]), figures[0].get<double>(), 1e-6 * figures[0].get<double>()) << name;
    EXPECT_NEAR(std::stod(m[2]), figures[1].get<double>(), 1e-6 * figures[1].get<double>()) << name;
  }

  // Only the keys asked for; a tolerance wide enough makes them close (exit 0); --exact refuses the tolerance.
  r = runs.zoo("checkpoint diff --keys '^model\\.model\\.transformer_decoder\\.norm\\.' --atol 10 " + a + " " + b);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("The checkpoints are equal within rtol and atol.\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("global_step"), std::string::npos) << r.output;
  r = runs.zoo("checkpoint diff --exact --keys '^model\\.model\\.transformer_decoder\\.norm\\.' --atol 10 " + a + " " +
               b);
  EXPECT_EQ(r.exit_code, 1) << r.output;
}

TEST(CheckpointDiff, MissingFilesAndBadArgumentsAreNamed) {
  Runs runs;
  const std::string d = runs.dir.path();
  ASSERT_EQ(runs.zoo("CPU --params " + runs.params + " --mode train --max_steps 3").exit_code, 0);
  const std::string ckpt = d + "/straight/checkpoint_3.mdl";
  auto r = runs.zoo("checkpoint diff " + ckpt + " " + d + "/nope.mdl");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(d + "/nope.mdl"), std::string::npos) << r.output;
  r = runs.zoo("checkpoint diff " + ckpt);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("expected two checkpoints, A and B"), std::string::npos) << r.output;
  r = runs.zoo("checkpoint diff --keys '(' " + ckpt + " " + ckpt);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--keys (: not a regular expression"), std::string::npos) << r.output;
  r = runs.zoo("checkpoint diff --rtol=-1 " + ckpt + " " + ckpt);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--rtol and --atol must be numbers >= 0"), std::string::npos) << r.output;
  r = runs.zoo("checkpoint diff " + ckpt + " " + ckpt);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}
