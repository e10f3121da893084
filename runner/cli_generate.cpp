// zoo generate, zoo serve and zoo eval-tasks: the command lines of the commands that load a causal LM with its
// tokenizer.
#include "runner/cli_options.h"
#include "runner/eval_tasks/task_file.h"

namespace zoo {

namespace {
constexpr int64_t kMaxNewTokens = 1000000;
}  // namespace

void add_tokenizer_options(cxxopts::Options& o) {
  o.add_options()(
      "tokenizer_type",
      "The data's tokenizer, as for zoo data create-hdf5 (GPT2Tokenizer, NeoXTokenizer, "
      "HuggingFaceTokenizer, ByteTokenizer). Default: HuggingFaceTokenizer when the checkpoint's directory holds "
      "a tokenizer (zoo convert copies it there), else ByteTokenizer.",
      cxxopts::value<std::string>()->default_value(""))("vocab_file", "GPT2Tokenizer: vocab.bpe.",
                                                        cxxopts::value<std::string>()->default_value(""))(
      "encoder_file", "GPT2Tokenizer: encoder.json; NeoXTokenizer: tokenizer.json.",
      cxxopts::value<std::string>()->default_value(""))(
      "huggingface_tokenizer",
      "HuggingFaceTokenizer: a tokenizer directory as Hugging Face saves one "
      "(tokenizer.json or tokenizer.model, with tokenizer_config.json).",
      cxxopts::value<std::string>()->default_value(""));
}

text::TokenizerSpec tokenizer_spec_of(const cxxopts::ParseResult& r) {
  text::TokenizerSpec spec{r["tokenizer_type"].as<std::string>(), r["vocab_file"].as<std::string>(),
                           r["encoder_file"].as<std::string>(), r["huggingface_tokenizer"].as<std::string>()};
  if (spec.type.empty() && !spec.huggingface_tokenizer.empty()) spec.type = "HuggingFaceTokenizer";
  return spec;
}

CliCommand parse_generate(const std::vector<std::string>& args) {
  cxxopts::Options o("zoo generate", "Continue a prompt with a trained model.");
  o.add_options()("checkpoint_path", "Checkpoint to load, or a model_dir (its newest checkpoint).",
                  cxxopts::value<std::string>())(
      "p,params", "Params YAML (default: the params stored in the checkpoint).", cxxopts::value<std::string>())(
      "prompt", "Text to continue.", cxxopts::value<std::string>())("max_new_tokens", "Tokens to generate.",
                                                                    cxxopts::value<int64_t>()->default_value("200"))(
      "temperature", "Sampling temperature; 0 is greedy.", cxxopts::value<double>()->default_value("1.0"))(
      "top_k", "Sample among the k most likely tokens (0: all).", cxxopts::value<int64_t>()->default_value("0"))(
      "top_p", "Sample among the most likely tokens holding this much probability.",
      cxxopts::value<double>()->default_value("1.0"))("seed",
                                                      "Seed of the sampler; the same seed repeats the same text.",
                                                      cxxopts::value<uint64_t>()->default_value("0"))(
      "device", "CPU or GPU.", cxxopts::value<std::string>()->default_value("CPU"))(
      "chat",
      "Send --prompt as a user message through the tokenizer's chat template; the reply ends at its eos_token.")(
      "system", "With --chat: a system message before the prompt.", cxxopts::value<std::string>()->default_value(""))(
      "h,help", "Print this help.");
  add_tokenizer_options(o);
  std::vector<std::string> rest(args.begin() + 1, args.end());
  const std::string prog = "zoo generate";
  const cxxopts::ParseResult r = parse_options(o, prog, rest);
  if (!r.unmatched().empty()) throw CliError("zoo generate: unexpected argument '" + r.unmatched().front() + "'");
  if (!r.count("checkpoint_path")) throw CliError("zoo generate: --checkpoint_path is required");
  if (!r.count("prompt") || r["prompt"].as<std::string>().empty())
    throw CliError("zoo generate: --prompt is required (a non-empty text)");
  CliCommand c;
  c.kind = CliCommand::Kind::generate;
  GenerateCommand& g = c.generate;
  g.checkpoint_path = r["checkpoint_path"].as<std::string>();
  if (r.count("params")) g.params_file = r["params"].as<std::string>();
  g.prompt = r["prompt"].as<std::string>();
  g.device = r["device"].as<std::string>();
  g.sampling.max_new_tokens = r["max_new_tokens"].as<int64_t>();
  g.sampling.temperature = r["temperature"].as<double>();
  g.sampling.top_k = r["top_k"].as<int64_t>();
  g.sampling.top_p = r["top_p"].as<double>();
  g.sampling.seed = r["seed"].as<uint64_t>();
  g.tokenizer = tokenizer_spec_of(r);
  g.chat = r.count("chat") > 0;
  g.system = r["system"].as<std::string>();
  if (!g.system.empty() && !g.chat) throw CliError("zoo generate: --system goes with --chat");
  if (g.sampling.max_new_tokens < 0 || g.sampling.temperature < 0 || g.sampling.top_k < 0 || g.sampling.top_p <= 0 ||
      g.sampling.top_p > 1)
    throw CliError("zoo generate: expected max_new_tokens >= 0, temperature >= 0, top_k >= 0, 0 < top_p <= 1");
  if (g.sampling.max_new_tokens > kMaxNewTokens)  // a typo, not a request: it would run for days
    throw CliError("zoo generate: --max_new_tokens " + std::to_string(g.sampling.max_new_tokens) + " is over " +
                   std::to_string(kMaxNewTokens) + "; generate in shorter pieces");
  if (g.device != "CPU" && g.device != "GPU") throw CliError("zoo generate: --device must be CPU or GPU");
  return c;
}

CliCommand parse_serve(const std::vector<std::string>& args) {
  cxxopts::Options o("zoo serve",
                     "Serve a trained causal LM over HTTP with OpenAI's completions and chat API "
                     "(docs/serving.md).");
  o.add_options()("checkpoint_path", "Checkpoint to serve, or a model_dir (its newest checkpoint).",
                  cxxopts::value<std::string>())(
      "p,params", "Params YAML (default: the params stored in the checkpoint).", cxxopts::value<std::string>())(
      "device", "CPU or GPU.", cxxopts::value<std::string>()->default_value("CPU"))(
      "host", "Address to listen on. Any other than 127.0.0.1 opens the model to the network.",
      cxxopts::value<std::string>()->default_value("127.0.0.1"))(
      "port", "Port to listen on (0: any free port, printed at start).", cxxopts::value<int>()->default_value("8000"))(
      "served_model_name", "The model's id in /v1/models and replies (empty: --checkpoint_path as given).",
      cxxopts::value<std::string>()->default_value(""))("max_tokens_limit",
                                                        "The most tokens one choice may ask for (max_tokens).",
                                                        cxxopts::value<int64_t>()->default_value("4096"))(
      "threads", "Connections served at once.", cxxopts::value<int>()->default_value("64"))("h,help",
                                                                                            "Print this help.");
  add_tokenizer_options(o);
  const std::string prog = "zoo serve";
  const cxxopts::ParseResult r = parse_options(o, prog, std::vector<std::string>(args.begin() + 1, args.end()));
  if (!r.unmatched().empty()) throw CliError(prog + ": unexpected argument '" + r.unmatched().front() + "'");
  if (!r.count("checkpoint_path")) throw CliError(prog + ": --checkpoint_path is required");
  CliCommand c;
  c.kind = CliCommand::Kind::serve;
  serve::ServeCommand& s = c.serve;
  s.checkpoint_path = r["checkpoint_path"].as<std::string>();
  if (r.count("params")) s.params_file = r["params"].as<std::string>();
  s.device = r["device"].as<std::string>();
  s.host = r["host"].as<std::string>();
  s.port = r["port"].as<int>();
  s.model_name = r["served_model_name"].as<std::string>();
  s.limits.max_tokens = r["max_tokens_limit"].as<int64_t>();
  s.threads = r["threads"].as<int>();
  s.tokenizer = tokenizer_spec_of(r);
  if (s.device != "CPU" && s.device != "GPU") throw CliError(prog + ": --device must be CPU or GPU");
  if (s.port < 0 || s.port > 65535) throw CliError(prog + ": --port must be in 0..65535");
  if (s.limits.max_tokens < 1 || s.limits.max_tokens > kMaxNewTokens)
    throw CliError(prog + ": --max_tokens_limit must be in 1.." + std::to_string(kMaxNewTokens));
  if (s.threads < 1 || s.threads > 4096) throw CliError(prog + ": --threads must be in 1..4096");
  return c;
}

CliCommand parse_eval_tasks(const std::vector<std::string>& args) {
  cxxopts::Options o("zoo eval-tasks",
                     "Score downstream task files (JSON Lines; docs/evaluation.md) with a trained "
                     "causal LM: acc, acc_norm, perplexities, exact match.");
  o.add_options()("checkpoint_path", "Checkpoint to evaluate, or a model_dir (its newest checkpoint).",
                  cxxopts::value<std::string>())(
      "tasks", "Task files, comma-separated; each is one task named by its file's stem.",
      cxxopts::value<std::vector<std::string>>())(
      "p,params", "Params YAML (default: the params stored in the checkpoint).", cxxopts::value<std::string>())(
      "device", "CPU or GPU.", cxxopts::value<std::string>()->default_value("CPU"))(
      "batch_size", "Requests scored per forward.", cxxopts::value<int64_t>()->default_value("8"))(
      "max_gen_toks", "generate_until: the most tokens generated where a record sets none.",
      cxxopts::value<int64_t>()->default_value("256"))("limit", "Records read from each task file (0: all).",
                                                       cxxopts::value<int64_t>()->default_value("0"))(
      "output_json", "Also write the metrics to this JSON file.", cxxopts::value<std::string>()->default_value(""))(
      "h,help", "Print this help.");
  add_tokenizer_options(o);
  const std::string prog = "zoo eval-tasks";
  const cxxopts::ParseResult r = parse_options(o, prog, std::vector<std::string>(args.begin() + 1, args.end()));
  if (!r.unmatched().empty()) throw CliError(prog + ": unexpected argument '" + r.unmatched().front() + "'");
  if (!r.count("checkpoint_path")) throw CliError(prog + ": --checkpoint_path is required");
  if (!r.count("tasks")) throw CliError(prog + ": --tasks is required (task files, comma-separated)");
  CliCommand c;
  c.kind = CliCommand::Kind::eval_tasks;
  eval_tasks::EvalTasksCommand& e = c.eval_tasks;
  e.checkpoint_path = r["checkpoint_path"].as<std::string>();
  if (r.count("params")) e.params_file = r["params"].as<std::string>();
  e.device = r["device"].as<std::string>();
  e.tasks = r["tasks"].as<std::vector<std::string>>();
  e.batch_size = r["batch_size"].as<int64_t>();
  e.max_gen_toks = r["max_gen_toks"].as<int64_t>();
  e.limit = r["limit"].as<int64_t>();
  e.output_json = r["output_json"].as<std::string>();
  e.tokenizer = tokenizer_spec_of(r);
  if (e.device != "CPU" && e.device != "GPU") throw CliError(prog + ": --device must be CPU or GPU");
  if (e.batch_size < 1 || e.max_gen_toks < 1 || e.limit < 0)
    throw CliError(prog + ": expected --batch_size >= 1, --max_gen_toks >= 1, --limit >= 0");
  if (const std::string same = eval_tasks::same_named_tasks(e.tasks); !same.empty()) throw CliError(prog + ": " + same);
  return c;
}

}  // namespace zoo
