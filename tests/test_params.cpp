// Params are checked completely before anything runs: the cases users hit,
// every key of a real config mutated, and modelzoo's Trainer format read into
// the same specs (and written back by `zoo config convert-legacy`).
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

#include "configs/schema/yaml_util.h"
#include "models/registry.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/params/trainer_format.h"
#include "runner/run.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

namespace fs = std::filesystem;

using zoo::testing::run_in_process;
using zoo::testing::RunResult;
// The tiny params with `from` replaced by `to` (which must occur once).
std::string tiny_with(const std::string& data, const std::string& model_dir, const std::string& from,
                      const std::string& to) {
  std::string y = zoo::testing::tiny_params_yaml(data, model_dir);
  const size_t at = y.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return y.replace(at, from.size(), to);
}

std::string line_col(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  const size_t line_start = text.rfind('\n', at) + 1;
  return std::to_string(std::count(text.begin(), text.begin() + at, '\n') + 1) + ":" +
         std::to_string(at - line_start + 1);
}

}  // namespace

// The six cases of issue 10, each at --validate_only, each before model_dir exists.
TEST(Params, ReportedCasesFailAtValidateOnly) {
  TempDir dir;
  zoo::testing::write_small_corpus(dir / "data");
  const std::string model_dir = dir / "m";
  auto expect_error = [&](const std::string& yaml, const std::string& expected) {
    const std::string file = zoo::testing::write_file(dir / "p.yaml", yaml);
    RunResult v = run_in_process({"CPU", "--params", file, "--mode", "train", "--validate_only"});
    EXPECT_EQ(v.code, 1);
    EXPECT_NE(v.error.find(expected), std::string::npos) << v.error;
    RunResult real = run_in_process({"CPU", "--params", file, "--mode", "train"});
    EXPECT_EQ(real.error, v.error);
    EXPECT_FALSE(fs::exists(model_dir)) << expected;
  };
  // 1. No eval_input: --mode train trains; evaluating names the missing section.
  const std::string no_eval = tiny_with(dir / "data", model_dir, "eval_input:", "unused_eval_input:");
  std::string yaml = no_eval;
  yaml.erase(yaml.find("unused_eval_input:"), yaml.find("model:") - yaml.find("unused_eval_input:"));
  const std::string file = zoo::testing::write_file(dir / "noeval.yaml", yaml);
  EXPECT_EQ(run_in_process({"CPU", "--params", file, "--mode", "train", "--num_steps", "2"}).code, 0);
  EXPECT_TRUE(fs::exists(model_dir + "/train/params_train.yaml"));
  fs::remove_all(model_dir);
  RunResult eval = run_in_process({"CPU", "--params", file, "--mode", "eval", "--validate_only"});
  EXPECT_NE(eval.error.find("eval_input: required for --mode eval but missing"), std::string::npos) << eval.error;
  // 2. A misspelt scheduler, at its own line.
  yaml = tiny_with(dir / "data", model_dir, "{scheduler: CosineDecay,", "{scheduler: CosineDecayy,");
  expect_error(yaml, "p.yaml:" + line_col(yaml, "CosineDecayy") +
                         ": optimizer.learning_rate.1.scheduler: unsupported scheduler 'CosineDecayy' (did you mean "
                         "'CosineDecayLR'?)");
  // 3. A misspelt checkpoint state.
  yaml = zoo::testing::tiny_params_yaml(dir / "data", model_dir, "  load_checkpoint_states: modle\n");
  expect_error(yaml, "runconfig.load_checkpoint_states: unknown state 'modle' (did you mean 'model'?)");
  // 4. A data processor whose batches lack what the model reads.
  yaml = tiny_with(
      dir / "data", model_dir,
      "  data_processor: ByteTextDataProcessor\n  data_dir: " + (dir / "data") + "/train\n  max_sequence_length: 32\n",
      "  data_processor: MNISTDataProcessor\n  data_dir: " + (dir / "data") + "/train\n");
  expect_error(yaml, "p.yaml:" + line_col(yaml, "MNISTDataProcessor") +
                         ": train_input.data_processor: MNISTDataProcessor does not produce input_ids, "
                         "attention_mask, which model 'gpt2' needs");
  // 5. Keys foreign to the chosen optimizer or scheduler.
  yaml = tiny_with(dir / "data", model_dir, "  weight_decay: 0.01\n", "  weight_decay: 0.01\n  momentum: 0.9\n");
  expect_error(yaml, "p.yaml:" + line_col(yaml, "momentum") + ": optimizer.momentum: not a key of the AdamW optimizer");
  yaml = tiny_with(dir / "data", model_dir, "total_iters: 10}", "total_iters: 10, T_max: 5}");
  expect_error(yaml,
               "p.yaml:" + line_col(yaml, "T_max") +
                   ": optimizer.learning_rate.0.T_max: not a key of the LinearLR scheduler (it takes total_iters, "
                   "initial_learning_rate, end_learning_rate, cycle)");
  // 6. Sizes no machine can build, caught at once.
  yaml = tiny_with(dir / "data", model_dir, "num_hidden_layers: 2", "num_hidden_layers: 9223372036854775807");
  expect_error(yaml, "model.num_hidden_layers: expected at most 4096 (zoo's limit)");
  yaml = tiny_with(dir / "data", model_dir, "hidden_size: 32", "hidden_size: 2000000000");
  yaml.replace(yaml.find("vocab_size: 256"), 15, "vocab_size: 2000000000");
  expect_error(yaml, "model.hidden_size: the model would have more than 2^50 parameters");
  yaml = tiny_with(dir / "data", model_dir, "filter_size: 64", "filter_size: 2147483647");
  yaml.replace(yaml.find("num_hidden_layers: 2"), 20, "num_hidden_layers: 4096");
  expect_error(yaml, "model.filter_size: the model would have more than 2^50 parameters");
}

// Every key of a real GPT config, misspelt, given a value of the wrong type
// and (numbers) a negative value: --validate_only names the key's own
// file:line:col and path, and a real run stops with the same message before
// it creates model_dir.
TEST(Params, EveryKeyOfARealGptConfigIsCheckedAtItsLine) {
  TempDir dir;
  const std::string original = zoo::testing::read_file(zoo::testing::modelzoo_configs_dir() +
                                                       "/transformers_pytorch_gpt3_Cerebras_GPT_111m.yaml");
  const std::string model_dir = dir / "m";
  struct Leaf {
    std::string path;
    YAML::Mark key, value;
    std::string scalar;
  };
  std::vector<Leaf> leaves;
  std::function<void(const YAML::Node&, const std::string&)> walk = [&](const YAML::Node& n, const std::string& path) {
    if (n.IsMap()) {
      for (const auto& kv : n) {
        const std::string p = path.empty() ? kv.first.as<std::string>() : path + "." + kv.first.as<std::string>();
        if (kv.second.IsScalar()) leaves.push_back({p, kv.first.Mark(), kv.second.Mark(), kv.second.Scalar()});
        else walk(kv.second, p);
      }
    } else if (n.IsSequence()) {
      for (size_t i = 0; i < n.size(); ++i) walk(n[i], path + "." + std::to_string(i));
    }
  };
  walk(YAML::Load(original), "");
  ASSERT_GT(leaves.size(), 50u);
  // Keys that only apply to Cerebras systems are ignored with a warning, whatever their value.
  const std::string original_file = zoo::testing::write_file(dir / "original.yaml", original);
  std::string ignored;
  for (const auto& w : load_params(original_file, YAML::Node()).warnings) ignored += w + "\n";
  // Replaces the text at (line, col) up to the end of the word (or of the value, to a comment).
  auto mutate = [&](const YAML::Mark& at, bool whole_value, const std::string& with) {
    std::string y = original;
    size_t pos = 0;
    for (int l = 0; l < at.line; ++l) pos = y.find('\n', pos) + 1;
    pos += at.column;
    size_t end = whole_value ? y.find_first_of("#\n", pos) : y.find(':', pos);
    while (whole_value && end > pos && y[end - 1] == ' ') --end;
    return y.replace(pos, end - pos, with);
  };
  auto where = [](const YAML::Mark& m) {
    return ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1) + ": ";
  };
  int checked = 0, out_of_range = 0;
  auto check = [&](const std::string& yaml, const std::string& expected, bool must_fail) {
    const std::string file = zoo::testing::write_file(dir / "p.yaml", yaml);
    RunResult v = run_in_process({"CPU", "--params", file, "--mode", "train", "--validate_only", "-o", model_dir});
    if (!must_fail && v.code == 0) return false;
    EXPECT_EQ(v.code, 1) << expected;
    EXPECT_NE(v.error.find(file + expected), std::string::npos) << "expected '" << expected << "', got: " << v.error;
    RunResult real = run_in_process({"CPU", "--params", file, "--mode", "train", "-o", model_dir});
    EXPECT_EQ(real.error, v.error);
    EXPECT_FALSE(fs::exists(model_dir)) << expected;
    ++checked;
    return true;
  };
  for (const Leaf& leaf : leaves) {
    const std::string key = leaf.path.substr(leaf.path.rfind('.') + 1);
    if (ignored.find(" " + leaf.path + ": ignored") != std::string::npos) continue;
    const bool names_a_processor = key == "data_processor" || key == "scheduler";
    if (!names_a_processor)  // without its name a section cannot say which keys it has
      check(mutate(leaf.key, false, key + "x"), where(leaf.key) + leaf.path + "x: unknown key", true);
    check(mutate(leaf.value, true, "{bad: 1}"), where(leaf.value) + leaf.path + ": ", true);
    char* end = nullptr;
    std::strtod(leaf.scalar.c_str(), &end);
    if (!leaf.scalar.empty() && *end == '\0' &&
        check(mutate(leaf.value, true, "-1"), where(leaf.value) + leaf.path + ": ", false))
      ++out_of_range;
  }
  EXPECT_GT(checked, 2 * 50);
  EXPECT_GT(out_of_range, 20);  // sizes, rates, steps: negative values rejected at their line
}

TEST(TrainerFormat, ModelzooTrainerFilesValidateWithTheirParameterCounts) {
  const std::string dir = zoo::testing::modelzoo_configs_dir() + "/trainer_format/";
  Params p = load_params(dir + "gpt3_Cerebras_GPT_111m.yaml", YAML::Node());
  EXPECT_TRUE(p.trainer_format);
  EXPECT_EQ(summarize_model(p).parameters, 111050496);
  EXPECT_EQ(p.runconfig.max_steps, 9037);
  EXPECT_EQ(p.runconfig.checkpoint_steps, 903);
  EXPECT_EQ(p.optimizer.optimizer_type, "AdamW");
  EXPECT_TRUE(p.optimizer.log_summaries);  // ComputeNorm
  EXPECT_TRUE(p.precision.mixed_precision);
  EXPECT_EQ(p.eval_input->batch_size(), 120);
  // One warning for the Cerebras-only key, naming it as written.
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("trainer.init.precision.precision_opt_level: ignored"), std::string::npos)
      << p.warnings[0];
  Params llama = load_params(dir + "llama2_7b.yaml", YAML::Node());
  EXPECT_EQ(summarize_model(llama).parameters, 6738415616);
  EXPECT_EQ(llama.optimizer.loss_scaling_factor, "dynamic");
  EXPECT_EQ(llama.optimizer.learning_rate.schedulers.size(), 2u);
}

// Errors in a Trainer-format file name the Trainer keys the user wrote, at their lines.
TEST(TrainerFormat, ErrorsNameTheTrainerKeys) {
  const std::string base =
      "trainer:\n"
      "  init:\n"
      "    model: {name: gpt2, vocab_size: 256, hidden_size: 32, num_hidden_layers: 2, num_heads: 2,\n"
      "            filter_size: 64, max_position_embeddings: 32}\n"
      "    optimizer:\n"
      "      AdamW: {weight_decay: 0.1}\n"
      "    schedulers:\n"
      "    - SequentialLR:\n"
      "        schedulers:\n"
      "        - LinearLR: {initial_learning_rate: 0.0, end_learning_rate: 0.1, total_iters: 10}\n"
      "        - ConstantLR: {learning_rate: 0.1}\n"
      "    loop: {max_steps: 20}\n"
      "    callbacks:\n"
      "    - GlobalFlags: {csx.performance.transfer_processes: 4}\n"
      "  fit:\n"
      "    train_dataloader: {data_processor: SyntheticDataProcessor, vocab_size: 256, max_sequence_length: 32,\n"
      "                       num_examples: 64, batch_size: 8}\n";
  auto error_of = [](const std::string& yaml) { return zoo::testing::params_error(yaml, "t.yaml"); };
  Params p = params_from_node(config::load_yaml_string(base, "t.yaml"), "t.yaml", YAML::Node());
  EXPECT_DOUBLE_EQ(optim::make_lr_schedule(p.optimizer.learning_rate)->at(15), 0.1);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("t.yaml:14:7: trainer.init.callbacks.0.GlobalFlags: ignored"), std::string::npos)
      << p.warnings[0];
  auto with = [&](const std::string& from, const std::string& to) {
    std::string y = base;
    return y.replace(y.find(from), from.size(), to);
  };
  std::string y = with("max_steps: 20", "max_steps: -20");
  EXPECT_NE(error_of(y).find("t.yaml:" + line_col(y, "-20") + ": trainer.init.loop.max_steps: expected a value > 0"),
            std::string::npos)
      << error_of(y);
  y = with("max_steps: 20", "max_stepz: 20");
  EXPECT_NE(error_of(y).find("trainer.init.loop.max_stepz: unknown key (did you mean 'max_steps'?)"), std::string::npos)
      << error_of(y);
  y = with("weight_decay: 0.1", "momentum: 0.1");
  EXPECT_NE(error_of(y).find("t.yaml:" + line_col(y, "momentum") +
                             ": trainer.init.optimizer.AdamW.momentum: not a key of the AdamW optimizer"),
            std::string::npos)
      << error_of(y);
  y = with("hidden_size: 32", "hidden_size: 0");
  EXPECT_NE(error_of(y).find("trainer.init.model.hidden_size: expected a value > 0"), std::string::npos) << error_of(y);
  y = with("total_iters: 10}", "total_iters: 10, gamma: 2}");
  EXPECT_NE(error_of(y).find("trainer.init.schedulers.0.SequentialLR.schedulers.0.gamma: not a key of the LinearLR"),
            std::string::npos)
      << error_of(y);
  y = with("GlobalFlags", "WeightSurgery");
  EXPECT_NE(error_of(y).find("trainer.init.callbacks.0: unsupported callback 'WeightSurgery'"), std::string::npos)
      << error_of(y);
  y = with("batch_size: 8}", "batch_size: 0}");
  EXPECT_NE(error_of(y).find("trainer.fit.train_dataloader.batch_size: expected a value > 0"), std::string::npos)
      << error_of(y);
  // A model zoo does not build is what is said first (here, not its second scheduler).
  y = with("model: {name: gpt2,", "model: {name: dino,");
  y.insert(y.find("    loop:"), "    - ConstantLR: {learning_rate: 0.1}\n");
  EXPECT_NE(error_of(y).find("t.yaml:" + line_col(y, "dino") +
                             ": trainer.init.model.name: modelzoo's dino model (a vision model) is not one zoo builds"),
            std::string::npos)
      << error_of(y);
}

// Keys of newer modelzoo releases (2.2 - 2.10): Llama 3.1's position
// scaling and the ScalePerParamLR scheduler wrapper are read; Cerebras-only settings (cluster_config, attention_kernel,
// micro_batch_size: auto) and a deprecated data key are accepted with a warning naming their line;
// position-scaling arguments that do not fit the model are errors.
TEST(TrainerFormat, KeysOfNewerModelzooReleasesAreRead) {
  const std::string base =
      "trainer:\n"
      "  init:\n"
      "    backend:\n"
      "      backend_type: CSX\n"
      "      cluster_config: {num_workers_per_csx: 1}\n"
      "    model: {name: LlamaModel, vocab_size: 256, hidden_size: 32, num_hidden_layers: 2, num_heads: 2,\n"
      "            filter_size: 64, max_position_embeddings: 32, position_embedding_type: rotary,\n"
      "            attention_kernel: optimized_beta, pos_scaling_factor: 8.0, pos_scaling_type: llama3,\n"
      "            pos_scaling_extra_args: {original_max_position_embeddings: 16, high_freq_factor: 4.0}}\n"
      "    optimizer:\n"
      "      AdamW: {weight_decay: 0.1}\n"
      "    schedulers:\n"
      "    - ScalePerParamLR:\n"
      "        scheduler:\n"
      "          LinearLR: {initial_learning_rate: 0.0, end_learning_rate: 0.1, total_iters: 10}\n"
      "    loop: {max_steps: 20}\n"
      "    callbacks:\n"
      "    - ScopedTrainFlags: {csx.performance.micro_batch_size: auto}\n"
      "  fit:\n"
      "    train_dataloader: {data_processor: GptHDF5MapDataProcessor, data_dir: ./d, vocab_size: 256, batch_size: "
      "8}\n";
  Params p = params_from_node(config::load_yaml_string(base, "t.yaml"), "t.yaml", YAML::Node());
  const YAML::Node model = p.resolved()["model"];
  EXPECT_EQ(model["pos_scaling_type"].as<std::string>(), "llama3");
  EXPECT_EQ(model["pos_scaling_factor"].as<double>(), 8.0);
  EXPECT_EQ(model["pos_scaling_extra_args"]["original_max_position_embeddings"].as<int>(), 16);
  // muP's ScalePerParamLR wrapper (modelzoo 2.4+): the schedule inside it (zoo always scales per group).
  EXPECT_DOUBLE_EQ(optim::make_lr_schedule(p.optimizer.learning_rate)->at(5), 0.05);
  ASSERT_EQ(p.warnings.size(), 4u);
  EXPECT_NE(p.warnings[0].find("t.yaml:5:7: trainer.init.backend.cluster_config: ignored (applies to Cerebras"),
            std::string::npos)
      << p.warnings[0];
  EXPECT_NE(p.warnings[1].find("t.yaml:8:13: trainer.init.model.attention_kernel: ignored"), std::string::npos)
      << p.warnings[1];
  EXPECT_NE(p.warnings[2].find("t.yaml:18:60: trainer.init.callbacks.0.ScopedTrainFlags.csx.performance."
                               "micro_batch_size: auto asks the Cerebras compiler to choose; zoo runs whole batches"),
            std::string::npos)
      << p.warnings[2];
  EXPECT_FALSE(p.resolved()["train_input"]["micro_batch_size"].IsDefined() &&
               !p.resolved()["train_input"]["micro_batch_size"].IsNull());
  EXPECT_NE(p.warnings[3].find("trainer.fit.train_dataloader.vocab_size: ignored (deprecated"), std::string::npos)
      << p.warnings[3];
  auto error_of = [](const std::string& yaml) { return zoo::testing::params_error(yaml, "t.yaml"); };
  auto with = [&](const std::string& from, const std::string& to) {
    std::string y = base;
    return y.replace(y.find(from), from.size(), to);
  };
  std::string y = with("high_freq_factor: 4.0", "beta_fast: 32");
  EXPECT_NE(error_of(y).find("trainer.init.model.pos_scaling_extra_args: beta_fast belongs to pos_scaling_type yarn, "
                             "not llama3"),
            std::string::npos)
      << error_of(y);
  y = with("high_freq_factor: 4.0", "high_freq_factor: 0.5");
  EXPECT_NE(error_of(y).find("high_freq_factor must be greater than low_freq_factor"), std::string::npos)
      << error_of(y);
  y = with("pos_scaling_type: llama3", "pos_scaling_type: yarn");
  EXPECT_NE(error_of(y).find("high_freq_factor belongs to pos_scaling_type llama3, not yarn"), std::string::npos)
      << error_of(y);
  y = with("position_embedding_type: rotary", "position_embedding_type: learned");
  EXPECT_NE(error_of(y).find("trainer.init.model.pos_scaling_factor: applies to rotary and alibi position embeddings "
                             "only (this model's are learned)"),
            std::string::npos)
      << error_of(y);
  y = with("pos_scaling_type: llama3", "pos_scaling_type: longrope");
  EXPECT_NE(error_of(y).find("longrope is not supported by zoo"), std::string::npos) << error_of(y);
}

// modelzoo asks only that micro_batch_size be at most batch_size (its
// multimodal_simple files: 24 of 220); zoo accumulates the largest size
// below it that divides the batch, with a warning; above the batch is an error.
TEST(Params, AMicroBatchSizeThatDoesNotDivideTheBatchBecomesOneThatDoes) {
  auto with_micro = [](int64_t micro) {
    std::string y = zoo::testing::tiny_params_yaml("/d", "/m");
    const size_t at = y.find("batch_size: ");
    y.insert(y.find('\n', at), "\n  micro_batch_size: " + std::to_string(micro));
    return y;
  };
  const std::string tiny = with_micro(3);
  const int64_t batch = YAML::Load(tiny)["train_input"]["batch_size"].as<int64_t>();
  ASSERT_NE(batch % 3, 0) << "the tiny params' batch_size is expected not to divide by 3";
  const Params p = params_from_node(config::load_yaml_string(tiny, "p.yaml"), "p.yaml", YAML::Node());
  int64_t expected = 3;
  while (batch % expected != 0) --expected;
  EXPECT_EQ(p.resolved()["train_input"]["micro_batch_size"].as<int64_t>(), expected);
  std::string warnings;
  for (const auto& w : p.warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("train_input.micro_batch_size: 3 does not divide batch_size " + std::to_string(batch) +
                          ": zoo accumulates micro-batches of " + std::to_string(expected)),
            std::string::npos)
      << warnings;
  const std::string above = zoo::testing::params_error(with_micro(batch + 1));
  EXPECT_NE(above.find("train_input.micro_batch_size: expected at most batch_size (" + std::to_string(batch) + ")"),
            std::string::npos)
      << above;
}

// modelzoo's models that zoo does not build (DINO, ResNet) are named as such
// when the Trainer format names them; the layers-API tutorial's keys now
// pick its family.
TEST(Params, ModelzooModelsZooDoesNotBuildAreNamed) {
  const std::string tiny = zoo::testing::tiny_params_yaml("/d", "/m");
  std::string named = tiny;
  named.replace(named.find("model:\n"), 7, "model:\n  name: dino\n");
  EXPECT_NE(
      zoo::testing::params_error(named).find("model.name: modelzoo's dino model (a vision model) is not one "
                                             "zoo builds; zoo builds gpt2, gptj, bert, bert/classifier, "
                                             "bert/token_classifier, bert/qa, bert/extractive_summarization, esm2, "
                                             "esm2/classification, t5, dpo, dpr, fc_mnist, unet, "
                                             "vision_transformer, dit, llava, multimodal_simple, "
                                             "layers_api_demo and their aliases"),
      std::string::npos)
      << zoo::testing::params_error(named);
  // A legacy file names no model: the tutorial's embedding_size and seq_len give it away.
  const std::string demo =
      "train_input: {num_samples: 64, seq_length: 10, batch_size: 8}\n"
      "model: {vocab_size: 26, embedding_size: 16, num_heads: 2, hidden_size: 16, "
      "num_hidden_layers: 1, dropout: 0.0, seq_len: 10, nonlinearity: gelu}\n"
      "optimizer: {optimizer_type: Adam, learning_rate: 0.001}\n"
      "runconfig: {max_steps: 2}\n";
  const Params p = params_from_node(config::load_yaml_string(demo, "p.yaml"), "p.yaml", YAML::Node());
  EXPECT_EQ(p.model_name, "layers_api_demo");
}

// csconfig (use_cbfloat16 in modelzoo's MNIST and DPR files) configures a
// Cerebras system: a warning at its line, nothing more; convert-legacy drops it.
TEST(Params, ACerebrasSystemSectionIsIgnoredWithAWarning) {
  const std::string tiny = zoo::testing::tiny_params_yaml("/d", "/m") + "csconfig:\n  use_cbfloat16: False\n";
  const Params p = params_from_node(config::load_yaml_string(tiny, "p.yaml"), "p.yaml", YAML::Node());
  std::string warnings;
  for (const auto& w : p.warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("p.yaml:" + line_col(tiny, "csconfig") +
                          ": csconfig: ignored: settings of a Cerebras system (CS-2) run"),
            std::string::npos)
      << warnings;
  EXPECT_EQ(p.resolved()["csconfig"].IsDefined(), false);

  TempDir dir;
  const std::string legacy = zoo::testing::write_file(dir / "legacy.yaml", tiny), trainer = dir / "trainer.yaml";
  const auto r =
      zoo::testing::run_command(zoo::testing::zoo_binary() + " config convert-legacy " + legacy + " " + trainer);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(zoo::testing::read_file(trainer).find("csconfig"), std::string::npos);
  YAML::Emitter a, b;
  a << p.resolved();
  b << load_params(trainer, YAML::Node()).resolved();
  EXPECT_EQ(std::string(a.c_str()), b.c_str());
}

// convert-legacy writes the Trainer form, which resolves to the same params;
// and a converted file trains like the original.
TEST(TrainerFormat, ConvertLegacyRoundTripsAndTrains) {
  TempDir dir;
  zoo::testing::write_small_corpus(dir / "data");
  const std::string legacy = zoo::testing::write_file(
      dir / "legacy.yaml", zoo::testing::tiny_params_yaml(dir / "data", dir / "m", "  checkpoint_steps: 2\n"));
  const std::string trainer = dir / "trainer.yaml";
  auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " config convert-legacy " + legacy + " " + trainer);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  YAML::Node t = YAML::LoadFile(trainer);
  EXPECT_EQ(t["trainer"]["init"]["optimizer"]["AdamW"]["weight_decay"].as<double>(), 0.01);
  EXPECT_EQ(
      t["trainer"]["init"]["schedulers"][0]["SequentialLR"]["schedulers"][1]["CosineDecayLR"]["total_iters"].as<int>(),
      200);
  EXPECT_EQ(t["trainer"]["init"]["precision"]["max_gradient_norm"].as<double>(), 1.0);
  YAML::Emitter a, b;
  a << load_params(legacy, YAML::Node()).resolved();
  b << load_params(trainer, YAML::Node()).resolved();
  EXPECT_EQ(std::string(a.c_str()), b.c_str());
  // An existing output is never overwritten.
  const std::string before = zoo::testing::read_file(trainer);
  r = zoo::testing::run_command(zoo::testing::zoo_binary() + " config convert-legacy " + legacy + " " + trainer);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("already exists"), std::string::npos) << r.output;
  EXPECT_EQ(zoo::testing::read_file(trainer), before);
  // Both forms train to the same weights.
  r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + legacy +
                                " --mode train --num_steps 2 -o " + (dir / "a"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + trainer +
                                " --mode train --num_steps 2 -o " + (dir / "b"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto model_a = ckpt::load_checkpoint_file(dir / "a/checkpoint_2.mdl").at("model").toGenericDict();
  auto model_b = ckpt::load_checkpoint_file(dir / "b/checkpoint_2.mdl").at("model").toGenericDict();
  ASSERT_EQ(model_a.size(), model_b.size());
  for (const auto& kv : model_a)
    EXPECT_TRUE(torch::equal(kv.value().toTensor(), model_b.at(kv.key()).toTensor())) << kv.key().toStringRef();
}

// Every legacy GPT/LLaMA config in tests/modelzoo_configs converts and reads back to the same resolved params.
TEST(TrainerFormat, EveryRealLegacyConfigConvertsToTheSameParams) {
  int converted = 0;
  for (const auto& e : fs::directory_iterator(zoo::testing::modelzoo_configs_dir())) {
    const std::string path = e.path().string();
    if (e.path().extension() != ".yaml") continue;
    Params legacy;
    try {
      legacy = load_params(path, YAML::Node());
    } catch (const config::ConfigError&) {
      continue;  // a family zoo does not have yet
    }
    std::vector<std::string> warnings;
    YAML::Node t = trainer_format::from_legacy(config::load_yaml_file(path), config::Context{path, "", &warnings});
    YAML::Emitter text, a, b;
    text << t;
    Params back = params_from_node(config::load_yaml_string(text.c_str(), "converted"), "converted", YAML::Node());
    a << legacy.resolved();
    b << back.resolved();
    EXPECT_EQ(std::string(a.c_str()), b.c_str()) << path;
    ++converted;
  }
  EXPECT_GE(converted, 7);  // gpt2 small, gpt3 111m (two), llama2 7b and 70b, code llama 7b, mistral 7b
}

// The R2.1 configs that validated before typed specs still do, with the same parameter counts.
TEST(Params, RealLegacyConfigsKeepTheirParameterCounts) {
  const std::map<std::string, int64_t> expected = {
      {"transformers_pytorch_gpt2_params_gpt2_small.yaml", 125226240},
      {"transformers_pytorch_gpt3_Cerebras_GPT_111m.yaml", 111050496},
      {"transformers_pytorch_gpt3_params_gpt3_111m.yaml", 111050496},
      {"transformers_pytorch_llama_params_llama2_7b.yaml", 6738415616},
      {"transformers_pytorch_llama_params_llama2_70b.yaml", 68976648192},
      {"transformers_pytorch_mistral_params_mistral_7B.yaml", 7241732096},
      {"transformers_pytorch_llama_params_code_llama_7b.yaml", 6738546688},  // 16 more tokens than Llama-2 7B
      // 44 x (4C^2 + 2CF + biases and norms) + tied (V + P) x C, C 6144, F 24576: its summary-only and
      // Cerebras-numerics keys (ws_summary, tf_summary, boundary_casting) are accepted with a warning.
      {"transformers_pytorch_gpt3_params_gpt3_20b.yaml", 20256221184}};
  for (const auto& [name, count] : expected)
    EXPECT_EQ(summarize_model(load_params(zoo::testing::modelzoo_configs_dir() + "/" + name, YAML::Node())).parameters,
              count)
        << name;
}

// rope_theta (Code Llama's 1e6) reaches the rotary embeddings: the first
// position is unrotated either way, later ones differ.
TEST(Params, RopeThetaSetsTheRotaryBase) {
  auto logits = [](const std::string& theta) {
    std::string y = zoo::testing::tiny_params_yaml("/x", "/y");
    y.insert(y.find("  dropout_rate: 0.0\n"), "  position_embedding_type: rotary\n  rope_theta: " + theta + "\n");
    Params p = params_from_node(config::load_yaml_string(y, "p.yaml"), "p.yaml", YAML::Node());
    torch::manual_seed(0);
    auto model = p.model->build(torch::TensorOptions());
    models::GenerationCache cache;
    torch::NoGradGuard no_grad;
    return model->next_logits(torch::arange(8).reshape({1, 8}), cache);
  };
  const torch::Tensor base = logits("10000.0"), code_llama = logits("1.0e+6");
  EXPECT_TRUE(torch::allclose(base.select(1, 0), code_llama.select(1, 0)));
  EXPECT_FALSE(torch::allclose(base.select(1, 7), code_llama.select(1, 7)));
  EXPECT_TRUE(torch::equal(base, logits("10000.0")));
}

// The run-time switches are runconfig keys, checked as every key is; the
// environment variables override the file; the resolved values make the
// run's kernel policy.
TEST(Params, RunTimeSwitchesAreRunconfigKeysTheEnvironmentOverrides) {
  TempDir dir;
  const std::string switches =
      "  cuda_kernels: norm,dense\n  cpu_kernels: false\n  cpu_gemm: blas\n  profile_steps: '2:3'\n"
      "  allreduce_bucket_mb: 4\n";
  Params p = zoo::testing::tiny_params(dir / "data", dir / "m", switches);
  EXPECT_EQ(p.runconfig.cuda_kernels, "norm,dense");
  EXPECT_EQ(p.runconfig.profile_steps, "2:3");
  EXPECT_EQ(p.runconfig.allreduce_bucket_mb, 4.0);
  models::KernelPolicy policy = kernel_policy_of(p.runconfig);
  EXPECT_EQ(policy.cuda_kernels, (std::set<std::string>{"dense", "norm"}));
  EXPECT_FALSE(policy.cpu_kernels);
  EXPECT_TRUE(policy.cpu_gemm_blas);

  {
    zoo::testing::EnvGuard env({{"ZOO_CUDA_KERNELS", "0"},
                                {"ZOO_CPU_KERNELS", "1"},
                                {"ZOO_CPU_GEMM", "auto"},
                                {"ZOO_PROFILE", "5:6"},
                                {"ZOO_BUCKET_MB", "0.5"}});
    p = zoo::testing::tiny_params(dir / "data", dir / "m", switches);
    EXPECT_EQ(p.runconfig.profile_steps, "5:6");
    EXPECT_EQ(p.runconfig.allreduce_bucket_mb, 0.5);
    policy = kernel_policy_of(p.runconfig);
    EXPECT_TRUE(policy.cuda_kernels.empty());
    EXPECT_TRUE(policy.cpu_kernels);
    EXPECT_FALSE(policy.cpu_gemm_blas);
  }
  auto error_with = [&](const std::string& runconfig_lines) {
    try {
      zoo::testing::tiny_params(dir / "data", dir / "m", runconfig_lines);
      return std::string();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  };
  EXPECT_NE(error_with("  cuda_kernels: norm,softmax\n").find("runconfig.cuda_kernels: unknown kernel 'softmax'"),
            std::string::npos)
      << error_with("  cuda_kernels: norm,softmax\n");
  EXPECT_NE(error_with("  profile_steps: '5:4'\n").find("runconfig.profile_steps: '5:4': expected FIRST:LAST"),
            std::string::npos)
      << error_with("  profile_steps: '5:4'\n");
  EXPECT_NE(error_with("  cpu_gemm: mkl\n").find("runconfig.cpu_gemm"), std::string::npos);
  zoo::testing::EnvGuard env({{"ZOO_CPU_GEMM", "mkl"}});
  EXPECT_NE(error_with("").find("ZOO_CPU_GEMM=mkl in the environment (runconfig.cpu_gemm)"), std::string::npos)
      << error_with("");
}
