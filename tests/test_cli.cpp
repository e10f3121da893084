// The command line: flags override runconfig, --help is complete, exit codes
// and one-line errors, --validate_only on real configs.
#include <gtest/gtest.h>

#include "runner/cli.h"
#include "runner/params/params.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::run_command;
using zoo::testing::TempDir;

TEST(Cli, FlagsOverrideRunconfigAndAbsentFlagsKeepYaml) {
  TempDir dir;
  std::string params = zoo::testing::write_file(
      dir / "p.yaml", zoo::testing::tiny_params_yaml("/data", "/from/yaml", "  max_steps: 100\n  eval_steps: 4\n"));
  CliCommand c =
      parse_cli({"CPU", "--params", params, "--mode", "eval", "--max_steps", "7", "--checkpoint_path", "c.mdl"});
  Params p = load_params(c.params_file, c.runconfig_overrides);
  EXPECT_EQ(p.runconfig.max_steps.value(), 7);     // CLI wins
  EXPECT_EQ(p.runconfig.eval_steps.value(), 4);    // YAML kept
  EXPECT_EQ(p.runconfig.model_dir, "/from/yaml");  // -o not given: YAML kept (modelzoo would override)
  EXPECT_EQ(p.runconfig.checkpoint_path.value(), "c.mdl");
  EXPECT_EQ(p.runconfig.mode, "eval");
  EXPECT_EQ(p.runconfig.target_device, "CPU");
  c = parse_cli({"GPU", "-p", params, "-m", "train", "-o", "/from/cli", "--disable_strict_checkpoint_loading"});
  p = load_params(c.params_file, c.runconfig_overrides);
  EXPECT_EQ(p.runconfig.model_dir, "/from/cli");
  EXPECT_TRUE(p.runconfig.disable_strict_checkpoint_loading);
  EXPECT_EQ(p.runconfig.target_device, "GPU");
}

TEST(Cli, OverridesAreValidatedLikeYaml) {
  TempDir dir;
  std::string params = zoo::testing::write_file(dir / "p.yaml", zoo::testing::tiny_params_yaml("/d", "/m"));
  CliCommand c = parse_cli({"CPU", "--params", params, "--mode", "train", "--num_steps", "-3"});
  EXPECT_THROW(load_params(c.params_file, c.runconfig_overrides), config::ConfigError);
  c = parse_cli({"CPU", "--params", params, "--mode", "fly"});
  EXPECT_THROW(load_params(c.params_file, c.runconfig_overrides), config::ConfigError);
}

TEST(Cli, UsageErrors) {
  EXPECT_THROW(parse_cli({}), CliError);
  EXPECT_THROW(parse_cli({"TPU", "--params", "p", "--mode", "train"}), CliError);
  EXPECT_THROW(parse_cli({"CPU", "--mode", "train"}), CliError);
  EXPECT_THROW(parse_cli({"CPU", "--params", "p"}), CliError);
  EXPECT_THROW(parse_cli({"CPU", "--params", "p", "--mode", "train", "--max_steps", "many"}), CliError);
  EXPECT_THROW(parse_cli({"CPU", "--params", "p", "--mode", "train", "--bogus"}), CliError);
}

TEST(Cli, HelpListsEveryFlagWithItsSchemaDoc) {
  auto r = run_command(zoo::testing::zoo_binary() + " --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag : {"--params", "--mode", "--model_dir", "--checkpoint_path", "--load_checkpoint_states",
                           "--disable_strict_checkpoint_loading", "--max_steps", "--num_steps", "--num_epochs",
                           "--eval_steps", "--logging", "--validate_only", "--help-config"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
  // Flag docs come from the runconfig schema.
  EXPECT_NE(r.output.find("Upper bound on global_step."), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[runconfig.disable_strict_checkpoint_loading]"), std::string::npos) << r.output;
}

TEST(Cli, SubcommandHelpGoesToStdoutAndExitsZero) {
  for (const char* sub : {"generate", "convert", "data create-hdf5 LMData", "data create-hdf5 --help"}) {
    auto r = run_command(zoo::testing::zoo_binary() + " " + sub + " --help 2>/dev/null");
    EXPECT_EQ(r.exit_code, 0) << sub;
    EXPECT_EQ(r.output.find("zoo: error"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("Usage:"), std::string::npos) << sub << ": " << r.output;
  }
  auto r = run_command(zoo::testing::zoo_binary() + " data create-hdf5 LMData --input_dir x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--output_dir is required"), std::string::npos) << r.output;
}

TEST(Cli, BadParamsExitNonZeroWithOneLineReason) {
  TempDir dir;
  std::string y = zoo::testing::tiny_params_yaml("/d", dir / "m");
  y.replace(y.find("hidden_size: 32"), 15, "hidden_size: -32");
  std::string params = zoo::testing::write_file(dir / "bad.yaml", y);
  auto r = run_command(zoo::testing::zoo_binary() + " CPU --params " + params + " --mode train");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find("zoo: error: " + params + ":"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("model.hidden_size: expected a value > 0"), std::string::npos) << r.output;
}

TEST(Cli, ValidateOnlyReports111MParametersForCerebrasGpt111m) {
  TempDir dir;
  std::string cfg = zoo::testing::modelzoo_configs_dir() + "/transformers_pytorch_gpt3_Cerebras_GPT_111m.yaml";
  auto r = run_command("cd " + dir.path() + " && " + zoo::testing::zoo_binary() + " CPU --params " + cfg +
                       " --mode train --validate_only");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Parameters: 111050496 (111.05M)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("FLOPs per token"), std::string::npos) << r.output;
  // Without --validate_only the missing data is named.
  r = run_command("cd " + dir.path() + " && " + zoo::testing::zoo_binary() + " CPU --params " + cfg +
                  " --mode train -o " + (dir / "m"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("train_input.data_dir: directory './language/datasets/pile_original/hdf5_dataset/"
                          "train_shuffled_msl2048/0/' does not exist"),
            std::string::npos)
      << r.output;
}

TEST(Cli, MergedParamsAreWrittenPerMode) {
  TempDir dir;
  zoo::testing::write_small_corpus(dir / "data");
  std::string params = zoo::testing::write_file(
      dir / "p.yaml", zoo::testing::tiny_params_yaml(dir / "data", dir / "m", "  eval_steps: 2\n"));
  auto r = run_command(zoo::testing::zoo_binary() + " CPU --params " + params + " --mode eval --logging WARNING");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  YAML::Node written = YAML::LoadFile(dir / "m/eval/params_eval.yaml");
  EXPECT_EQ(written["runconfig"]["mode"].as<std::string>(), "eval");
  EXPECT_EQ(written["runconfig"]["eval_steps"].as<int>(), 2);
  EXPECT_EQ(written["runconfig"]["logging"].as<std::string>(), "WARNING");
  EXPECT_EQ(written["model"]["hidden_size"].as<int>(), 32);
  // The written file is itself valid params.
  EXPECT_NO_THROW(load_params(dir / "m/eval/params_eval.yaml", YAML::Node()));
  // And a results row per evaluation.
  EXPECT_NE(zoo::testing::read_file(dir / "m/eval/results.csv").find("checkpoint,global_step,loss,eval/accuracy"),
            std::string::npos);
}

// docs/config_reference.md is what zoo prints from its schema, so the docs
// cannot drift from the keys zoo reads.
TEST(Docs, ConfigReferenceIsWhatZooPrints) {
  const auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " --help-config=markdown");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string file = zoo::testing::source_dir() + "/docs/config_reference.md";
  ASSERT_TRUE(std::filesystem::exists(file)) << file;
  EXPECT_TRUE(r.output == zoo::testing::read_file(file))
      << "docs/config_reference.md differs from `zoo --help-config=markdown`: run scripts/gen_config_reference.sh";
  EXPECT_NE(r.output.find("| `cuda_kernels` |"), std::string::npos) << "the run-time switches are documented keys";
}
