// Params validation: every kind of bad input gives an error naming the file,
// line, key path and what was expected; defaults and warnings as documented.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>

#include "configs/schema/yaml_util.h"
#include "runner/optim/lr_schedule.h"
#include "runner/params/params.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

// The tiny params with `line` spliced into `section` (replacing nothing).
std::string with_line(const std::string& section, const std::string& line) {
  std::string y = zoo::testing::tiny_params_yaml("/nonexistent", "/tmp/unused");
  size_t at = y.find(section + ":\n");
  EXPECT_NE(at, std::string::npos);
  at += section.size() + 2;
  return y.insert(at, "  " + line + "\n");
}

using zoo::testing::line_of;
std::string error_of(const std::string& yaml) { return zoo::testing::params_error(yaml); }

}  // namespace

TEST(Config, YamlSyntaxErrorNamesFileAndLine) {
  TempDir dir;
  std::string path = zoo::testing::write_file(dir / "bad.yaml", "model:\n  hidden_size: [1, 2\nrunconfig: {}\n");
  try {
    load_params(path, YAML::Node());
    FAIL() << "expected a ConfigError";
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("YAML syntax error"), std::string::npos) << e.what();
  }
}

// YAML merge keys (modelzoo's DPR config: `ctx_encoder: {<<: *base_model}`)
// expand as PyYAML expands them: the mapping's own keys win, then earlier
// merged mappings over later ones; a merge of a non-mapping is named.
TEST(Config, MergeKeysExpandAsInPyYaml) {
  const YAML::Node y = config::load_yaml_string(
      "base: &base {a: 1, b: 2, c: 3}\n"
      "other: &other {c: 30, d: 40}\n"
      "one:\n  <<: *base\n  b: 20\n"
      "two:\n  <<: [*other, *base]\n  a: 10\n",
      "m.yaml");
  EXPECT_EQ(y["one"]["a"].as<int>(), 1);
  EXPECT_EQ(y["one"]["b"].as<int>(), 20);
  EXPECT_EQ(y["one"]["c"].as<int>(), 3);
  EXPECT_FALSE(y["one"]["<<"]);
  EXPECT_EQ(y["two"]["a"].as<int>(), 10);
  EXPECT_EQ(y["two"]["b"].as<int>(), 2);
  EXPECT_EQ(y["two"]["c"].as<int>(), 30);  // the earlier merged mapping wins
  EXPECT_EQ(y["two"]["d"].as<int>(), 40);
  EXPECT_EQ(y["base"]["b"].as<int>(), 2);  // the anchor itself is untouched
  try {
    config::load_yaml_string("x: &x 5\ny:\n  <<: *x\n", "m.yaml");
    ADD_FAILURE() << "a scalar merged";
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("m.yaml:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("y.<<: a merge key takes a mapping"), std::string::npos) << e.what();
  }
}

// Aliases share their anchor's node: a loop (`a: &x {b: *x}`) or a tree
// far larger than the file (each level aliasing the one below nine times)
// is refused at once, naming the file, the line and the key path, before
// any walk that would overflow the stack or run for days.
TEST(Config, AliasLoopsAndAliasBombsAreRefusedNamingTheLine) {
  auto error = [](const std::string& text) {
    try {
      config::load_yaml_string(text, "a.yaml");
    } catch (const config::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  for (const std::string loop : {"model: &x {a: *x}\n", "model: &x\n  a: [1, *x]\n", "model: &x\n  <<: *x\n"}) {
    const std::string e = error(loop);
    EXPECT_NE(e.find("a.yaml:1:"), std::string::npos) << loop << ": " << e;
    EXPECT_NE(e.find("refers to a mapping or list that contains it"), std::string::npos) << loop << ": " << e;
  }
  EXPECT_NE(error("model: &x {a: *x}\n").find("model.a:"), std::string::npos);
  // 9^10 values from 11 short lines: refused as soon as the walk passes its limit.
  std::string bomb = "l0: &l0 [1, 2, 3, 4, 5, 6, 7, 8, 9]\n";
  for (int level = 1; level <= 10; ++level) {
    const std::string below = "*l" + std::to_string(level - 1);
    bomb += "l" + std::to_string(level) + ": &l" + std::to_string(level) + " [";
    for (int k = 0; k < 9; ++k) bomb += (k ? ", " : "") + below;
    bomb += "]\n";
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string e = error(bomb + "model: *l10\n");
  EXPECT_NE(e.find("a.yaml:"), std::string::npos) << e;
  EXPECT_NE(e.find("expands to more than 100000 values through its aliases"), std::string::npos) << e;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // Aliases used as real configs use them still load.
  const YAML::Node ok = config::load_yaml_string("a: &a {x: 1}\nb: *a\nc: [*a, *a]\n", "a.yaml");
  EXPECT_EQ(ok["c"][1]["x"].as<int>(), 1);
}

// A params path that is a FIFO would block the read forever and a device
// (/dev/zero) never ends: both are refused by name, as is a file too large
// to be params.
TEST(Config, ParamsThatAreNotRegularFilesOrTooLargeAreRefused) {
  TempDir dir;
  const std::string fifo = dir / "params.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto error = [](const std::string& path) {
    try {
      load_params(path, YAML::Node());
    } catch (const config::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  for (const std::string& path : {fifo, std::string("/dev/zero"), dir.path()}) {
    const std::string e = error(path);
    EXPECT_NE(e.find(path + ": not a regular file"), std::string::npos) << e;
  }
  const std::string big = dir / "big.yaml";
  std::filesystem::resize_file(zoo::testing::write_file(big, "# params\n"), std::uintmax_t{17} << 20);
  EXPECT_NE(error(big).find(big + ": 17825792 bytes, over the 16 MiB a params file may have"), std::string::npos)
      << error(big);
}

// precision_opt_level and the backend type steer Cerebras hardware and are
// ignored here, but still take only the values modelzoo accepts.
TEST(Config, CerebrasSettingsStillTakeOnlyTheirValues) {
  EXPECT_NE(error_of(with_line("runconfig", "precision_opt_level: banana"))
                .find("runconfig.precision_opt_level: expected 0, 1 or 2 (a Cerebras setting zoo ignores), got banana"),
            std::string::npos);
  EXPECT_NE(error_of(with_line("runconfig", "target_device: banana"))
                .find("runconfig.target_device: expected CPU, GPU or CSX"),
            std::string::npos);
  EXPECT_EQ(error_of(with_line("runconfig", "precision_opt_level: 1")), "");
  std::string trainer = zoo::testing::read_file(zoo::testing::modelzoo_configs_dir() + "/trainer_format/fc_mnist.yaml");
  trainer.replace(trainer.find("    precision:\n"), 15, "    backend:\n      backend_type: GPUS\n    precision:\n");
  EXPECT_NE(error_of(trainer).find("trainer.init.backend.backend_type: expected CPU, GPU or CSX, got GPUS"),
            std::string::npos)
      << error_of(trainer);
}

TEST(Config, MissingFileIsAClearError) {
  try {
    load_params("/nonexistent/params.yaml", YAML::Node());
    FAIL();
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/params.yaml: cannot read"), std::string::npos);
  }
}

TEST(Config, UnknownKeyNamesLineAndSuggests) {
  std::string y = with_line("model", "hidden_sise: 64");
  std::string err = error_of(y);
  EXPECT_NE(err.find("p.yaml:" + line_of(y, "hidden_sise") + ":"), std::string::npos) << err;
  EXPECT_NE(err.find("model.hidden_sise: unknown key"), std::string::npos) << err;
  EXPECT_NE(err.find("did you mean 'hidden_size'"), std::string::npos) << err;
}

TEST(Config, UnknownKeysAreErrorsInEverySection) {
  EXPECT_NE(error_of(with_line("runconfig", "max_stepz: 3")).find("runconfig.max_stepz: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(with_line("optimizer", "lerning_rate: 3")).find("optimizer.lerning_rate: unknown key"),
            std::string::npos);
  EXPECT_NE(error_of(with_line("train_input", "bach_size: 3")).find("train_input.bach_size: unknown key"),
            std::string::npos);
  // A `trainer:` section makes the file a Trainer-format one, which holds nothing else.
  EXPECT_NE(error_of(zoo::testing::tiny_params_yaml("/x", "/y") + "trainer: {}\n")
                .find("train_input: unknown section: a Trainer-format params file holds only `trainer:`"),
            std::string::npos);
}

TEST(Config, WrongTypeNamesExpectedType) {
  std::string y = zoo::testing::tiny_params_yaml("/x", "/y");
  y.replace(y.find("num_heads: 2"), 12, "num_heads: two");
  std::string err = error_of(y);
  EXPECT_NE(err.find("p.yaml:" + line_of(y, "num_heads") + ":"), std::string::npos) << err;
  EXPECT_NE(err.find("model.num_heads: expected an integer, got 'two'"), std::string::npos) << err;

  EXPECT_NE(error_of(with_line("train_input", "num_workers: [1]")).find("expected an integer, got a list"),
            std::string::npos);
  EXPECT_NE(error_of(with_line("runconfig", "save_initial_checkpoint: maybe")).find("expected true or false"),
            std::string::npos);
}

TEST(Config, OutOfRangeValues) {
  EXPECT_NE(
      error_of(with_line("runconfig", "max_steps: -5")).find("runconfig.max_steps: expected a value > 0, got '-5'"),
      std::string::npos);
  std::string y = zoo::testing::tiny_params_yaml("/x", "/y");
  y.replace(y.find("dropout_rate: 0.0"), 17, "dropout_rate: 1.5");
  EXPECT_NE(error_of(y).find("model.dropout_rate: expected a value in [0, 1), got '1.5'"), std::string::npos)
      << error_of(y);
  y = zoo::testing::tiny_params_yaml("/x", "/y");
  y.replace(y.find("num_heads: 2"), 12, "num_heads: 3");
  EXPECT_NE(error_of(y).find("model.num_heads: num_heads (3) must divide hidden_size (32)"), std::string::npos)
      << error_of(y);
  EXPECT_NE(error_of(with_line("model", "nonlinearity: gelu2")).find("model.nonlinearity: expected one of gelu"),
            std::string::npos);
  EXPECT_NE(error_of(with_line("optimizer", "max_gradient_value: 1.0")).find("set only one of max_gradient_norm"),
            std::string::npos);
  EXPECT_NE(error_of(with_line("runconfig", "num_epochs: 2") + "  num_steps: 3\n").find("mutually exclusive"),
            std::string::npos);
}

TEST(Config, DuplicateKeysAreErrors) {
  std::string y = with_line("model", "hidden_size: 64");  // the tiny params already set hidden_size
  EXPECT_NE(error_of(y).find("model.hidden_size: duplicate key"), std::string::npos) << error_of(y);
}

TEST(Config, CerebrasHardwareKeysWarnInsteadOfFailing) {
  std::string y = with_line("runconfig", "num_csx: 4");
  Params p = params_from_node(config::load_yaml_string(y, "p.yaml"), "p.yaml", YAML::Node());
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("runconfig.num_csx: ignored (applies to Cerebras CSX systems only)"), std::string::npos);
  EXPECT_NE(p.warnings[0].find("p.yaml:" + line_of(y, "num_csx")), std::string::npos) << p.warnings[0];
}

TEST(Config, LegacyKeysAreReadWithOneWarningNamingTheNewKey) {
  std::string y = with_line("optimizer", "weight_decay_rate: 0.1");
  y.erase(y.find("  weight_decay: 0.01\n"), 21);
  Params p = params_from_node(config::load_yaml_string(y, "p.yaml"), "p.yaml", YAML::Node());
  EXPECT_EQ(p.optimizer.weight_decay, 0.1);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("p.yaml:" + line_of(y, "weight_decay_rate") +
                               ":3: optimizer.weight_decay_rate: old name, read as 'weight_decay'"),
            std::string::npos)
      << p.warnings[0];
  // Both names with one value: fine; with two values: an error naming both.
  EXPECT_EQ(error_of(with_line("optimizer", "weight_decay_rate: 1.0e-2")),
            "");  // the tiny params say weight_decay: 0.01
  EXPECT_NE(
      error_of(with_line("optimizer", "weight_decay_rate: 0.1"))
          .find("optimizer.weight_decay_rate: old name of 'weight_decay', which is also given, with another value "
                "(0.1 vs 0.01)"),
      std::string::npos)
      << error_of(with_line("optimizer", "weight_decay_rate: 0.1"));
  // Pre-2.1 scheduler spellings and R1.x's use_bfloat16 likewise.
  Params old = params_from_node(config::load_yaml_string(with_line("model", "use_bfloat16: true"), "p.yaml"), "p.yaml",
                                YAML::Node());
  EXPECT_EQ(old.precision.fp16_type, "bfloat16");
  EXPECT_NE(old.warnings.at(0).find("model.use_bfloat16: old name, read as 'fp16_type'"), std::string::npos);
}

TEST(Config, UnknownDataProcessorListsKnownOnes) {
  std::string y = zoo::testing::tiny_params_yaml("/x", "/y");
  y.replace(y.find("ByteTextDataProcessor"), 21, "ByteTextDataProcesor");
  std::string err = error_of(y);
  EXPECT_NE(err.find("train_input.data_processor: unknown data processor 'ByteTextDataProcesor'"), std::string::npos);
  EXPECT_NE(err.find("GptHDF5MapDataProcessor"), std::string::npos) << err;
}

TEST(Config, DefaultsComeFromTheDeclarations) {
  Params p = zoo::testing::tiny_params("/x", "/y");
  YAML::Node r = p.resolved();
  EXPECT_EQ(r["model"]["layer_norm_epsilon"].as<double>(), 1e-5);
  EXPECT_EQ(r["model"]["attention_type"].as<std::string>(), "scaled_dot_product");
  EXPECT_EQ(r["model"]["name"].as<std::string>(), "gpt2");
  EXPECT_EQ(r["runconfig"]["autoload_last_checkpoint"].as<bool>(), true);
  EXPECT_EQ(r["runconfig"]["seed"].as<int>(), 7);
  EXPECT_EQ(r["train_input"]["drop_last"].as<bool>(), true);
  EXPECT_EQ(p.optimizer.eps_value(), 1e-6);  // not given: AdamW's own default, shown in the resolved params
  EXPECT_EQ(r["optimizer"]["eps"].as<double>(), 1e-6);
  EXPECT_FALSE(r["optimizer"]["momentum"]);  // an SGD key: not part of AdamW's resolved params
  // The help text lists every declared key with its default.
  std::string help = describe_all_schemas();
  for (const char* key : {"load_checkpoint_states", "max_gradient_norm", "share_embedding_weights", "shuffle_seed"})
    EXPECT_NE(help.find(key), std::string::npos) << key;
}

TEST(Config, LearningRateScheduleListMatchesReferenceFormulas) {
  YAML::Node lr = config::load_yaml_string(
      "- {scheduler: Linear, initial_learning_rate: 0.0, end_learning_rate: 0.1, total_iters: 10}\n"
      "- {scheduler: CosineDecay, initial_learning_rate: 0.1, end_learning_rate: 0.01, total_iters: 20}\n"
      "- {scheduler: ConstantLR, learning_rate: 0.005}\n",
      "lr.yaml");
  config::Context ctx{"lr.yaml", "optimizer", nullptr};
  auto s = optim::make_lr_schedule(lr, ctx);
  EXPECT_DOUBLE_EQ(s->at(0), 0.0);
  EXPECT_DOUBLE_EQ(s->at(5), 0.05);
  EXPECT_DOUBLE_EQ(s->at(10), 0.1);  // second scheduler's step 0
  EXPECT_NEAR(s->at(20), 0.01 + 0.09 * 0.5 * (1 + std::cos(M_PI * 10 / 20)), 1e-15);
  EXPECT_DOUBLE_EQ(s->at(30), 0.005);
  EXPECT_DOUBLE_EQ(s->at(1000), 0.005);
  // Pre-2.1 spellings are accepted.
  auto old = optim::make_lr_schedule(
      config::load_yaml_string("{scheduler: Linear, base_lr: 1.0, end_learning_rate: 0.0, steps: 4}", "lr.yaml"), ctx);
  EXPECT_DOUBLE_EQ(old->at(1), 0.75);
}

TEST(Config, BadScheduleIsAClearError) {
  config::Context ctx{"lr.yaml", "optimizer", nullptr};
  auto expect_error = [&](const std::string& yaml, const std::string& expected) {
    try {
      optim::make_lr_schedule(config::load_yaml_string(yaml, "lr.yaml"), ctx);
      ADD_FAILURE() << "no error for " << yaml;
    } catch (const config::ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  expect_error("- {scheduler: Constant, learning_rate: 0.1}\n- {scheduler: Constant, learning_rate: 0.2}\n",
               "optimizer.learning_rate.0.total_iters: required for every scheduler but the last");
  expect_error("{scheduler: Warmup, initial_learning_rate: 1}", "unsupported scheduler 'Warmup'");
  expect_error("{scheduler: Linear, end_learning_rate: 0.1, total_iters: 3}",
               "initial_learning_rate: required by the Linear scheduler");
}

TEST(Config, RealModelzooGptConfigsValidate) {
  for (const char* name :
       {"transformers_pytorch_gpt3_Cerebras_GPT_111m.yaml", "transformers_pytorch_gpt3_params_gpt3_111m.yaml",
        "transformers_pytorch_gpt2_params_gpt2_small.yaml"}) {
    std::string path = zoo::testing::modelzoo_configs_dir() + "/" + name;
    EXPECT_NO_THROW(load_params(path, YAML::Node())) << path;
  }
}

// Every real modelzoo config's optimizer and runconfig sections parse (model
// sections belong to the model families), R1.x key names included (with a
// warning each).
TEST(Config, RealConfigsOptimizerAndRunconfigSectionsParse) {
  int parsed = 0;
  for (const auto& e : std::filesystem::directory_iterator(zoo::testing::modelzoo_configs_dir())) {
    if (!e.is_regular_file() || e.path().extension() != ".yaml") continue;  // trainer_format/, the license
    const std::string path = e.path().string();
    YAML::Node root = config::load_yaml_file(path);
    if (!root["runconfig"]) continue;  // not a params file (the runconfig schema copy)
    std::vector<std::string> warnings;
    config::Context rc{path, "runconfig", &warnings};
    EXPECT_NO_THROW(RunConfig::schema().parse(root["runconfig"], rc)) << path;
    config::Context oc{path, "optimizer", &warnings};
    YAML::Node optimizer = root["optimizer"];
    optimizer.remove("adjust_learning_rate");  // muP (not in zoo yet)
    optimizer.remove("ws_summary");            // a Cerebras weight-streaming summary flag (not in zoo yet)
    try {
      OptimizerConfig o = OptimizerConfig::parse(optimizer, oc);
      EXPECT_NO_THROW(optim::make_lr_schedule(o.learning_rate)) << path;
      ++parsed;
    } catch (const config::ConfigError& err) {
      ADD_FAILURE() << err.what();
    }
  }
  EXPECT_GE(parsed, 25);
}
