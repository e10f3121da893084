// Implementation of runner/eval_tasks/downstream.h.
#include "runner/eval_tasks/downstream.h"

#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "data/text/hf_tokenizer.h"
#include "models/model.h"
#include "runner/generate.h"
#include "runner/log.h"

namespace zoo::eval_tasks {

namespace fs = std::filesystem;

namespace {

std::vector<TaskFile> read_all(const std::vector<std::string>& paths, int64_t limit) {
  std::vector<TaskFile> tasks;
  for (const auto& path : paths) tasks.push_back(read_task_file(path, limit));
  return tasks;
}

}  // namespace

DownstreamTasks::DownstreamTasks(const EvalTasksConfig& config, const std::optional<std::string>& start_checkpoint)
    : config_(config), tasks_(read_all(config.tasks.items, config.limit)) {
  if (start_checkpoint) {
    const std::string dir = fs::path(*start_checkpoint).parent_path().string();
    if (!text::tokenizer_files(dir.empty() ? "." : dir).empty()) start_dir_ = dir.empty() ? "." : dir;
  }
  size_t docs = 0;
  for (const auto& t : tasks_) docs += t.docs.size();
  log::info(strf("eval_tasks: %zu task(s), %zu records, scored with every evaluation", tasks_.size(), docs));
}

DownstreamTasks::~DownstreamTasks() = default;

void DownstreamTasks::checkpoint_loaded(const std::string& checkpoint, const std::string& tokenizer_dir) {
  checkpoint_ = checkpoint;
  checkpoint_tokenizer_dir_ = tokenizer_dir;
}

const text::Tokenizer& DownstreamTasks::tokenizer(int64_t model_vocab) {
  text::TokenizerSpec spec{"HuggingFaceTokenizer", "", "", ""};
  if (!config_.tokenizer.empty()) spec.huggingface_tokenizer = config_.tokenizer;
  else if (!checkpoint_tokenizer_dir_.empty()) spec.huggingface_tokenizer = checkpoint_tokenizer_dir_;
  else if (!start_dir_.empty()) spec.huggingface_tokenizer = start_dir_;
  else if (model_vocab <= 256) spec.type = "ByteTokenizer";
  else
    throw std::runtime_error(
        "eval_tasks: no tokenizer beside " + (checkpoint_.empty() ? "the model" : checkpoint_) +
        " or runconfig.checkpoint_path; set eval_tasks.tokenizer to the model's tokenizer directory");
  const std::string from = spec.type + ":" + spec.huggingface_tokenizer;
  if (!tokenizer_ || from != tokenizer_from_) {
    tokenizer_ = text::make_tokenizer(spec);
    tokenizer_from_ = from;
    log::info("eval_tasks: tokenizer " + (spec.huggingface_tokenizer.empty() ? spec.type : spec.huggingface_tokenizer));
  }
  return *tokenizer_;
}

std::map<std::string, double> DownstreamTasks::run(models::Model& model, TaskRunOptions options) {
  options.batch_size = config_.batch_size;
  options.max_gen_toks = config_.max_gen_toks;
  const text::Tokenizer& tok = tokenizer(model.vocab_size().value_or(0));
  return run_tasks(model, tok, tasks_, options);
}

void run_eval_tasks_command(const EvalTasksCommand& c) {
  const std::vector<TaskFile> tasks = read_all(c.tasks, c.limit);  // bad task files fail before the model loads
  const LoadedLanguageModel loaded = load_language_model(c.checkpoint_path, c.params_file, c.device, c.tokenizer);
  if (!loaded.model->is_causal_lm())
    throw std::runtime_error(c.checkpoint_path + ": downstream tasks need a causal language model");
  loaded.model->eval();
  TaskRunOptions options;
  options.batch_size = c.batch_size;
  options.max_gen_toks = c.max_gen_toks;
  const std::map<std::string, double> metrics = run_tasks(*loaded.model, *loaded.tokenizer, tasks, options);
  nlohmann::json out = {{"checkpoint", c.checkpoint_path}, {"results", nlohmann::json::object()}};
  for (const auto& [name, value] : metrics) {
    const size_t slash = name.rfind('/');
    const std::string task = name.substr(0, slash), metric = name.substr(slash + 1);
    std::cout << strf("%-24s %-16s %.6f", task.c_str(), metric.c_str(), value) << std::endl;
    out["results"][task][metric] = value;
  }
  if (!c.output_json.empty()) {
    std::ofstream f(c.output_json);
    f << out.dump(2) << "\n";
    f.close();
    if (!f) throw std::runtime_error(c.output_json + ": cannot write the results");
  }
}

}  // namespace zoo::eval_tasks
