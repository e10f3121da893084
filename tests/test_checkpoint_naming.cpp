// Where checkpoints go and what they are called: modelzoo's Trainer keys
// checkpoint.checkpoint_name and checkpoint.checkpoint_root, written by a
// run, found again by the next one's autoload and by eval_all.
#include <gtest/gtest.h>

#include <filesystem>

#include "runner/checkpoint/checkpoint.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

TEST(CheckpointNaming, TemplatesNameAndRecognizeFiles) {
  const ckpt::CheckpointNaming plain;
  EXPECT_EQ(plain.file_name(12), "checkpoint_12.mdl");
  EXPECT_EQ(plain.file_name(12, "20261126_130000"), "checkpoint_12_20261126_130000.mdl");
  EXPECT_EQ(plain.match("checkpoint_12_20261126_130000.mdl"),
            std::make_pair(std::string("12"), std::string("20261126_130000")));
  EXPECT_FALSE(plain.match("checkpoint_12.mdl.tmp"));

  const ckpt::CheckpointNaming padded("run.a-{step:06d}.pt");
  EXPECT_EQ(padded.file_name(42), "run.a-000042.pt");
  EXPECT_EQ(padded.file_name(1234567), "run.a-1234567.pt");  // wider than the padding, as Python's format
  EXPECT_EQ(padded.match("run.a-000042.pt"), std::make_pair(std::string("000042"), std::string()));
  EXPECT_FALSE(padded.match("runxa-000042.pt")) << "the template's dot is a dot";
  EXPECT_FALSE(padded.match("checkpoint_42.mdl"));

  for (const char* bad : {"checkpoint.mdl", "{epoch}_{step}.mdl", "{step:x}.mdl", "{step}_{step}.mdl", "ck/{step}.mdl"})
    EXPECT_NE(ckpt::CheckpointNaming::check(bad), "") << bad;
  EXPECT_EQ(ckpt::CheckpointNaming::check("{step:d}"), "");
  EXPECT_THROW(ckpt::CheckpointNaming("no_field.mdl"), std::invalid_argument);
}

// A Trainer-format file (written by convert-legacy from the legacy keys)
// saves under its own names in its own directory; the next run resumes from
// there, max_checkpoints prunes there, and eval_all evaluates what is there.
TEST(CheckpointNaming, RunsWriteResumeAndEvaluateUnderTheirNames) {
  TempDir dir;
  zoo::testing::write_small_corpus(dir / "data");
  const std::string root = dir / "ckpts";
  const std::string legacy = zoo::testing::write_file(
      dir / "legacy.yaml",
      zoo::testing::tiny_params_yaml(dir / "data", dir / "m",
                                     "  checkpoint_steps: 2\n  max_checkpoints: 2\n  eval_steps: 1\n"
                                     "  checkpoint_name: 'step-{step:04d}.mdl'\n  checkpoint_root: " +
                                         root + "\n"));
  const std::string params = dir / "trainer.yaml";
  auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " config convert-legacy " + legacy + " " + params);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  YAML::Node trainer = config::load_yaml_file(params);
  EXPECT_EQ(trainer["trainer"]["init"]["checkpoint"]["checkpoint_name"].as<std::string>(), "step-{step:04d}.mdl");
  EXPECT_EQ(trainer["trainer"]["init"]["checkpoint"]["checkpoint_root"].as<std::string>(), root);

  const std::string zoo = zoo::testing::zoo_binary() + " CPU --params " + params;
  r = zoo::testing::run_command(zoo + " --mode train --num_steps 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const ckpt::CheckpointNaming naming("step-{step:04d}.mdl");
  auto steps = [&] {
    std::vector<int64_t> out;
    for (const auto& c : ckpt::list_checkpoints(root, naming)) out.push_back(c.step);
    return out;
  };
  EXPECT_EQ(steps(), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(std::filesystem::exists(root + "/step-0002.mdl"));
  EXPECT_FALSE(std::filesystem::exists(dir / "m/checkpoint_3.mdl")) << "nothing under the default name";

  r = zoo::testing::run_command(zoo + " --mode train --num_steps 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Loading checkpoint " + root + "/step-0003.mdl"), std::string::npos) << r.output;
  // Saved at 5 and 6; pruned to two, never the one this run resumed from.
  EXPECT_EQ(steps(), (std::vector<int64_t>{3, 6}));

  r = zoo::testing::run_command(zoo + " --mode eval_all");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string csv = zoo::testing::read_file(dir / "m/eval/results.csv");
  EXPECT_NE(csv.find(root + "/step-0003.mdl,3,"), std::string::npos) << csv;
  EXPECT_NE(csv.find(root + "/step-0006.mdl,6,"), std::string::npos) << csv;
}

TEST(CheckpointNaming, BadSettingsNameTheKey) {
  const std::string tiny = zoo::testing::tiny_params_yaml("/d", "/m");
  EXPECT_NE(zoo::testing::params_error(tiny + "  checkpoint_name: model.mdl\n")
                .find("runconfig.checkpoint_name: expected a file name with one {step}"),
            std::string::npos)
      << zoo::testing::params_error(tiny + "  checkpoint_name: model.mdl\n");
  EXPECT_NE(zoo::testing::params_error(tiny + "  checkpoint_root: s3://bucket/run\n")
                .find("runconfig.checkpoint_root: expected a directory; zoo does not write to S3"),
            std::string::npos)
      << zoo::testing::params_error(tiny + "  checkpoint_root: s3://bucket/run\n");
  // modelzoo's version check has nothing to check in zoo: a warning, not an error.
  const Params p =
      params_from_node(config::load_yaml_string(tiny + "  strict_version: false\n", "p.yaml"), "p.yaml", YAML::Node());
  std::string warnings;
  for (const auto& w : p.warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("strict_version"), std::string::npos) << warnings;
}
