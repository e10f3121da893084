// Implementation of runner/cli.h with cxxopts.
#include "runner/cli.h"

#include <algorithm>
#include <cxxopts.hpp>
#include <map>

#include "models/registry.h"
#include "runner/cli_options.h"
#include "runner/params/runconfig.h"

namespace zoo {

namespace {

// The doc of a runconfig key, so a flag and its YAML key never disagree.
std::string doc_of(const std::string& key) {
  for (const auto& f : RunConfig::schema().describe())
    if (f.key == key) return f.doc + " [runconfig." + key + "]";
  return key;
}

// Flags that override runconfig keys of the same name.
const std::vector<std::string> kIntFlags = {"max_steps", "num_steps", "num_epochs", "eval_steps"};
const std::vector<std::string> kStringFlags = {"checkpoint_path", "load_checkpoint_states", "logging"};
const std::vector<std::string> kBoolFlags = {"disable_strict_checkpoint_loading", "validate_only"};

cxxopts::Options run_options() {
  cxxopts::Options o("zoo", "Train and evaluate modelzoo-style YAML models with LibTorch.");
  o.custom_help(
      "{CPU|GPU} --params P.yaml --mode {train,eval,train_and_eval,eval_all} [options]\n"
      "  zoo corpus --output_dir DIR   write the built-in text corpus\n"
      "  zoo generate --checkpoint_path CKPT|MODEL_DIR --prompt TEXT [--temperature T --top_k K "
      "--top_p P --seed S --max_new_tokens N --tokenizer_type T ...]\n"
      "  zoo serve --checkpoint_path CKPT|MODEL_DIR [--port 8000 --host 127.0.0.1]   OpenAI-compatible HTTP "
      "server (docs/serving.md)\n"
      "  zoo eval-tasks --checkpoint_path CKPT|MODEL_DIR --tasks A.jsonl,B.jsonl   downstream task metrics "
      "(docs/evaluation.md)\n"
      "  zoo convert CKPT [--model NAME] --src-fmt {hf|zoo|peft} --tgt-fmt {zoo|hf} [--config F] --output-dir D   "
      "(see its --help)\n"
      "  zoo data create-hdf5 LMData|Summarization|Chat --input_dir D --output_dir O --tokenizer_type T ...\n"
      "  zoo config convert-legacy IN.yaml OUT.yaml   write a legacy params file in modelzoo's Trainer format\n"
      "  zoo config diff A.yaml B.yaml   compare two params files as resolved (exit 0: the same run)\n"
      "  zoo config stats P.yaml [--ranks N]   parameters, FLOPs per token and step, model state per device\n"
      "  zoo checkpoint info CKPT [--json --verify]   what a checkpoint holds, without reading its tensors\n"
      "  zoo checkpoint diff A.mdl B.mdl [--rtol R --atol A --keys REGEX]   compare two checkpoints (exit 0: equal)\n"
      "  zoo checkpoint list MODEL_DIR | delete CKPT | copy CKPT DEST | move CKPT DEST | consolidate IN OUT\n"
      "  zoo convert --list              every Hugging Face converter\n"
      "  zoo launch --nproc_per_node N [--nnodes M --node_rank R --master_addr A --master_port P] -- "
      "{CPU|GPU} --params P.yaml --mode M ...   start data-parallel ranks\n"
      "  zoo --help-config             every params YAML key with type, default and doc\n"
      "  zoo --help-config=markdown    the same as docs/config_reference.md");
  o.positional_help("");
  o.set_width(110);
  o.add_options()("device", "CPU or GPU (as modelzoo's run.py subcommand).", cxxopts::value<std::string>())(
      "p,params",
      "Params YAML file: sections train_input, eval_input, model, optimizer, runconfig, or "
      "modelzoo's Trainer format (trainer: init/fit/validate/validate_all).",
      cxxopts::value<std::string>())("m,mode", doc_of("mode"), cxxopts::value<std::string>())(
      "o,model_dir", doc_of("model_dir") + " Only overrides the YAML when given.", cxxopts::value<std::string>());
  for (const auto& k : kStringFlags) o.add_options()(k, doc_of(k), cxxopts::value<std::string>());
  for (const auto& k : kIntFlags) o.add_options()(k, doc_of(k), cxxopts::value<int64_t>());
  for (const auto& k : kBoolFlags) o.add_options()(k, doc_of(k));
  o.add_options()("h,help", "Print this help.")("help-config",
                                                "Print every params YAML key (=markdown: as docs/config_reference.md).",
                                                cxxopts::value<std::string>()->implicit_value("text"));
  o.parse_positional({"device"});
  return o;
}

std::vector<const char*> argv_of(const std::string& prog, const std::vector<std::string>& args) {
  std::vector<const char*> v{prog.c_str()};
  for (const auto& a : args) v.push_back(a.c_str());
  return v;
}

CliCommand parse_corpus(const std::vector<std::string>& args) {
  cxxopts::Options o("zoo corpus", "Write zoo's built-in deterministic text corpus (train/ and eval/).");
  o.add_options()("output_dir", "Directory to write train/corpus.txt and eval/corpus.txt into.",
                  cxxopts::value<std::string>())("train_bytes", "Approximate size of the training text.",
                                                 cxxopts::value<int64_t>()->default_value("2000000"))(
      "eval_bytes", "Approximate size of the eval text.", cxxopts::value<int64_t>()->default_value("200000"));
  std::vector<std::string> rest(args.begin() + 1, args.end());
  const std::string prog = "zoo corpus";
  auto argv = argv_of(prog, rest);
  auto r = o.parse(static_cast<int>(argv.size()), argv.data());
  if (!r.unmatched().empty()) throw CliError("unexpected argument '" + r.unmatched().front() + "'");
  CliCommand c;
  c.kind = CliCommand::Kind::corpus;
  if (!r.count("output_dir")) throw CliError("zoo corpus: --output_dir is required");
  c.output_dir = r["output_dir"].as<std::string>();
  c.train_bytes = r["train_bytes"].as<int64_t>();
  c.eval_bytes = r["eval_bytes"].as<int64_t>();
  if (c.train_bytes <= 0 || c.eval_bytes <= 0) throw CliError("zoo corpus: sizes must be positive");
  return c;
}

CliCommand parse_convert(const std::vector<std::string>& args) {
  if (args.size() == 2 && args[1] == "--list") {
    CliCommand c;
    c.kind = CliCommand::Kind::tool;
    c.tool.kind = tools::ToolCommand::Kind::convert_list;
    return c;
  }
  cxxopts::Options o("zoo convert",
                     "Convert checkpoints between Hugging Face (safetensors + config.json) and zoo. A "
                     "LoRA checkpoint exports as the merged model plus a PEFT adapter in adapter/; a "
                     "PEFT adapter imports onto a zoo base checkpoint (--src-fmt peft).");
  o.add_options()("checkpoint",
                  "Source: HF model.safetensors, its index json or their directory; a zoo checkpoint; or (peft) "
                  "a PEFT adapter directory.",
                  cxxopts::value<std::string>())(
      "model",
      "Converter (zoo convert --list describes each): " + models::hf_converter_list() + "; modelzoo's names " +
          models::hf_converter_alias_list() +
          " are read too. hf -> zoo: default from config.json's model_type; "
          "zoo -> hf: default the one Hugging Face model type that can hold the model.",
      cxxopts::value<std::string>()->default_value(""))("src-fmt", "hf, zoo or peft.", cxxopts::value<std::string>())(
      "tgt-fmt", "zoo or hf.", cxxopts::value<std::string>())(
      "config",
      "hf -> zoo: the HF config.json (default: beside the weights); zoo -> hf: a params YAML "
      "(default: the params stored in the checkpoint).",
      cxxopts::value<std::string>())("output-dir", "Where to write the result.", cxxopts::value<std::string>())(
      "base-checkpoint", "peft -> zoo: the zoo checkpoint of the base model the adapter applies to.",
      cxxopts::value<std::string>())("h,help", "Print this help.");
  o.parse_positional({"checkpoint"});
  std::vector<std::string> rest(args.begin() + 1, args.end());
  const std::string prog = "zoo convert";
  const cxxopts::ParseResult r = parse_options(o, prog, rest);
  for (const char* k : {"checkpoint", "src-fmt", "tgt-fmt", "output-dir"})
    if (!r.count(k))
      throw CliError(std::string("zoo convert: ") + (std::string(k) == "checkpoint" ? "CKPT" : std::string("--") + k) +
                     " is required (see zoo convert --help)");
  CliCommand c;
  c.kind = CliCommand::Kind::convert;
  c.convert.checkpoint = r["checkpoint"].as<std::string>();
  c.convert.model = r["model"].as<std::string>();
  c.convert.src_fmt = r["src-fmt"].as<std::string>();
  c.convert.tgt_fmt = r["tgt-fmt"].as<std::string>();
  if (r.count("config")) c.convert.config = r["config"].as<std::string>();
  c.convert.output_dir = r["output-dir"].as<std::string>();
  if (r.count("base-checkpoint")) c.convert.base_checkpoint = r["base-checkpoint"].as<std::string>();
  return c;
}

CliCommand parse_create_hdf5(const std::vector<std::string>& args) {
  const std::string mode = args.size() > 2 ? args[2] : "";
  const bool lm = mode == "LMData", finetuning = mode == "Summarization" || mode == "Chat";
  const std::string prog = "zoo data create-hdf5 " + (lm || finetuning ? mode : "MODE");
  cxxopts::Options o(prog,
                     "Tokenize text into modelzoo HDF5 samples (<output_name>_<n>.h5 + data_params.json), as "
                     "create_hdf5_dataset.py does. MODE: LMData (.txt, a document per file, and .jsonl, a document per "
                     "line), Summarization (.jsonl prompt/completion pairs, loss on the completion) or Chat (.jsonl "
                     "conversations rendered with the tokenizer's chat template, loss on the assistant turns); inputs "
                     "gzipped or not.");
  o.set_width(110);
  std::string types;
  for (const auto& t : text::tokenizer_types()) types += (types.empty() ? "" : ", ") + t;
  o.add_options()("input_dir", "Directory of input files (searched recursively).", cxxopts::value<std::string>())(
      "output_dir", "Where to write the dataset; must not hold one already.", cxxopts::value<std::string>())(
      "tokenizer_type", "One of: " + types + " (default with --huggingface_tokenizer: HuggingFaceTokenizer).",
      cxxopts::value<std::string>())("vocab_file", "GPT2Tokenizer: vocab.bpe (the merges).",
                                     cxxopts::value<std::string>()->default_value(""))(
      "encoder_file", "GPT2Tokenizer: encoder.json; NeoXTokenizer / HuggingFaceTokenizer: tokenizer.json.",
      cxxopts::value<std::string>()->default_value(""))(
      "huggingface_tokenizer",
      "HuggingFaceTokenizer: a local tokenizer directory as Hugging Face saves one "
      "(tokenizer.json or tokenizer.model / spiece.model, with tokenizer_config.json), or one such file, e.g. the "
      "directory zoo convert wrote (it copies the tokenizer there); zoo does not download.",
      cxxopts::value<std::string>()->default_value(""))("max_seq_length", "Tokens per sample.",
                                                        cxxopts::value<int64_t>()->default_value("2048"))(
      "eos_id", "Ends every document / completion (default: the tokenizer's eos_token, else its <|endoftext|>).",
      cxxopts::value<int64_t>())("pad_id", "Fills short samples (default: eos_id).", cxxopts::value<int64_t>())(
      "files_per_record", "Samples per output file.", cxxopts::value<int64_t>()->default_value("50000"))(
      "output_name", "Output file name prefix.", cxxopts::value<std::string>()->default_value("examples"))(
      "h,help", "Print this help.");
  o.add_options("LMData")("pack_sequences", "Pack documents into one stream before cutting samples (true/false).",
                          cxxopts::value<std::string>()->default_value("true"))(
      "jsonl_key", "Key of the text in .jsonl lines.", cxxopts::value<std::string>()->default_value("text"));
  o.add_options("Summarization")("prompt_key", "Key of the prompt in .jsonl lines.",
                                 cxxopts::value<std::string>()->default_value("prompt"))(
      "completion_key", "Key of the completion.", cxxopts::value<std::string>()->default_value("completion"))(
      "sep_token", "A token of the vocabulary put between prompt and completion.",
      cxxopts::value<std::string>()->default_value(""));
  o.add_options("Chat")("multi_turn_key", "Key of the list of messages.",
                        cxxopts::value<std::string>()->default_value("messages"))(
      "multi_turn_role_key", "Key of a message's role (system, user, assistant).",
      cxxopts::value<std::string>()->default_value("role"))("multi_turn_content_key", "Key of a message's text.",
                                                            cxxopts::value<std::string>()->default_value("content"))(
      "chat_template", "A Jinja file to use instead of the tokenizer's chat_template.",
      cxxopts::value<std::string>()->default_value(""));
  o.add_options("Summarization and Chat")(
      "truncate",
      "A sample over max_seq_length tokens is dropped (false, modelzoo's behaviour) or cut to its first "
      "max_seq_length tokens (true); both are counted.",
      cxxopts::value<std::string>()->default_value("false"))(
      "pack",
      "Pack several samples into each row (true/false), each attending only within itself: modelzoo's "
      "variable-sequence-length layout, (n, 5, msl), read with use_vsl: true. Rows fill by best-fit decreasing.",
      cxxopts::value<std::string>()->default_value("false"))("use_vsl", "modelzoo's name for --pack.",
                                                             cxxopts::value<std::string>()->default_value("false"));
  auto help = [&] { return o.help({"", "LMData", "Summarization", "Chat", "Summarization and Chat"}); };
  auto boolean = [&](const cxxopts::ParseResult& r, const char* key) {
    const std::string v = r[key].as<std::string>();
    if (v != "true" && v != "True" && v != "false" && v != "False")
      throw CliError(prog + ": --" + key + " expects true or false, got '" + v + "'");
    return v == "true" || v == "True";
  };
  if (args.size() < 2 || args[1] != "create-hdf5")
    throw CliError("zoo data: expected 'zoo data create-hdf5 MODE ...'\n" + help());
  if (mode == "-h" || mode == "--help") throw CliHelp(help());
  if (!lm && !finetuning)
    throw CliError(
        "zoo data create-hdf5: expected the mode LMData, Summarization or Chat (zoo has no FIM or "
        "Customize modes yet; modelzoo's VSL processors are Summarization and Chat with --pack true), got '" +
        mode + "'");
  std::vector<std::string> rest(args.begin() + 3, args.end());
  const cxxopts::ParseResult r = parse_options(o, prog, rest, help());
  if (!r.unmatched().empty()) throw CliError(prog + ": unexpected argument '" + r.unmatched().front() + "'");
  for (const char* k : {"input_dir", "output_dir"})
    if (!r.count(k)) throw CliError(prog + ": --" + k + " is required (see --help)");
  if (!r.count("tokenizer_type") && !r.count("huggingface_tokenizer"))
    throw CliError(prog + ": --tokenizer_type is required (or --huggingface_tokenizer DIR alone) (see --help)");
  // An option of another mode would be silently ignored: say so instead.
  const std::vector<std::pair<std::string, std::vector<const char*>>> mode_options = {
      {"LMData", {"pack_sequences", "jsonl_key"}},
      {"Summarization", {"prompt_key", "completion_key", "sep_token", "truncate", "pack", "use_vsl"}},
      {"Chat",
       {"multi_turn_key", "multi_turn_role_key", "multi_turn_content_key", "chat_template", "truncate", "pack",
        "use_vsl"}}};
  for (const auto& [owner, keys] : mode_options)
    for (const char* k : keys)
      if (owner != mode && r.count(k)) {
        bool mine = false;
        for (const auto& [m, ks] : mode_options)
          if (m == mode)
            for (const char* kk : ks) mine = mine || std::string(kk) == k;
        if (!mine) throw CliError(prog + ": --" + k + " is an option of mode " + owner + ", not of " + mode);
      }
  CliCommand c;
  c.kind = CliCommand::Kind::create_hdf5;
  data::CreateHdf5Options& d = c.create_hdf5;
  d.mode = mode;
  d.input_dir = r["input_dir"].as<std::string>();
  d.output_dir = r["output_dir"].as<std::string>();
  d.tokenizer = {r.count("tokenizer_type") ? r["tokenizer_type"].as<std::string>() : "HuggingFaceTokenizer",
                 r["vocab_file"].as<std::string>(), r["encoder_file"].as<std::string>(),
                 r["huggingface_tokenizer"].as<std::string>()};
  d.max_seq_length = r["max_seq_length"].as<int64_t>();
  if (r.count("eos_id")) d.eos_id = r["eos_id"].as<int64_t>();
  if (r.count("pad_id")) d.pad_id = r["pad_id"].as<int64_t>();
  d.pack_sequences = boolean(r, "pack_sequences");
  d.jsonl_key = r["jsonl_key"].as<std::string>();
  d.files_per_record = r["files_per_record"].as<int64_t>();
  d.output_name = r["output_name"].as<std::string>();
  d.prompt_key = r["prompt_key"].as<std::string>();
  d.completion_key = r["completion_key"].as<std::string>();
  d.sep_token = r["sep_token"].as<std::string>();
  d.multi_turn_key = r["multi_turn_key"].as<std::string>();
  d.multi_turn_role_key = r["multi_turn_role_key"].as<std::string>();
  d.multi_turn_content_key = r["multi_turn_content_key"].as<std::string>();
  d.chat_template_file = r["chat_template"].as<std::string>();
  d.truncate = boolean(r, "truncate");
  d.pack = boolean(r, "pack") || boolean(r, "use_vsl");
  return c;
}

// zoo launch [options] -- <zoo arguments>: the options before "--", the rank's command after.
CliCommand parse_launch(const std::vector<std::string>& args) {
  const std::string help =
      "zoo launch --nproc_per_node N [--nnodes M --node_rank R --master_addr HOST --master_port PORT] -- "
      "{CPU|GPU} --params P.yaml --mode M ...\n"
      "  Starts this machine's N ranks of a data-parallel job (runconfig.enable_distributed: true), each the\n"
      "  zoo command after --, with RANK, LOCAL_RANK, WORLD_SIZE (N * M), LOCAL_WORLD_SIZE, MASTER_ADDR and\n"
      "  MASTER_PORT set as torchrun sets them (defaults: 1 node, 127.0.0.1:29500). OMP_NUM_THREADS, unless set,\n"
      "  becomes cores / N. When a rank fails, the others are stopped and zoo launch exits with its code.\n"
      "  On M machines run it once on each, with --node_rank 0..M-1 and rank 0's address as --master_addr.\n";
  const auto dash = std::find(args.begin(), args.end(), "--");
  std::vector<std::string> own(args.begin() + 1, dash);
  for (const auto& a : own)
    if (a == "--help" || a == "-h") throw CliHelp(help);
  CliCommand c;
  c.kind = CliCommand::Kind::launch;
  LaunchCommand& l = c.launch;
  if (dash == args.end() || dash + 1 == args.end())
    throw CliError("zoo launch: expected `-- <zoo arguments>`\n" + help);
  l.args.assign(dash + 1, args.end());
  std::map<std::string, int64_t*> ints = {{"--nproc_per_node", &l.nproc_per_node},
                                          {"--nnodes", &l.nnodes},
                                          {"--node_rank", &l.node_rank},
                                          {"--master_port", &l.master_port}};
  for (size_t i = 0; i < own.size(); ++i) {
    std::string flag = own[i], value;
    if (const size_t eq = flag.find('='); eq != std::string::npos) value = flag.substr(eq + 1), flag.resize(eq);
    else if (i + 1 < own.size()) value = own[++i];
    else throw CliError("zoo launch: " + flag + " needs a value");
    if (flag == "--master_addr") {
      l.master_addr = value;
    } else if (ints.count(flag)) {
      char* end = nullptr;
      *ints[flag] = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0')
        throw CliError("zoo launch: " + flag + " expects an integer, got '" + value + "'");
    } else {
      throw CliError("zoo launch: unknown option '" + flag + "'\n" + help);
    }
  }
  if (l.nproc_per_node < 1 || l.nnodes < 1 || l.node_rank < 0 || l.node_rank >= l.nnodes || l.master_port < 1 ||
      l.master_port > 65535)
    throw CliError(
        "zoo launch: expected --nproc_per_node >= 1, --nnodes >= 1, 0 <= --node_rank < --nnodes and a "
        "port in 1..65535");
  return c;
}

}  // namespace

cxxopts::ParseResult parse_options(cxxopts::Options& o, const std::string& prog, const std::vector<std::string>& rest,
                                   const std::string& help) {
  auto argv = argv_of(prog, rest);
  cxxopts::ParseResult r;
  try {
    r = o.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const cxxopts::exceptions::exception& e) {
    throw CliError(prog + ": " + e.what());
  }
  if (r.count("help")) throw CliHelp(help.empty() ? o.help() : help);
  return r;
}

std::string usage() { return run_options().help(); }

CliCommand parse_cli(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "corpus") return parse_corpus(args);
  if (!args.empty() && args[0] == "generate") return parse_generate(args);
  if (!args.empty() && args[0] == "serve") return parse_serve(args);
  if (!args.empty() && args[0] == "eval-tasks") return parse_eval_tasks(args);
  if (!args.empty() && args[0] == "convert") return parse_convert(args);
  if (!args.empty() && args[0] == "data") return parse_create_hdf5(args);
  if (!args.empty() && args[0] == "config") return parse_config(args);
  if (!args.empty() && args[0] == "launch") return parse_launch(args);
  if (!args.empty() && args[0] == "checkpoint") return parse_checkpoint(args);
  cxxopts::Options o = run_options();
  const std::string prog = "zoo";
  auto argv = argv_of(prog, args);
  cxxopts::ParseResult r;
  try {
    r = o.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const cxxopts::exceptions::exception& e) {
    throw CliError(std::string(e.what()) + " (see zoo --help)");
  }
  CliCommand c;
  if (r.count("help")) return c.kind = CliCommand::Kind::help, c;
  if (r.count("help-config")) {
    c.help_format = r["help-config"].as<std::string>();
    if (c.help_format != "text" && c.help_format != "markdown")
      throw CliError("--help-config=" + c.help_format + ": expected text or markdown");
    return c.kind = CliCommand::Kind::help_config, c;
  }
  if (!r.unmatched().empty()) throw CliError("unexpected argument '" + r.unmatched().front() + "' (see zoo --help)");
  if (!r.count("device")) throw CliError("missing device: zoo {CPU|GPU} --params P.yaml --mode M (see zoo --help)");
  std::string device = r["device"].as<std::string>();
  if (device != "CPU" && device != "GPU")
    throw CliError("device must be CPU or GPU, got '" + device + "'" +
                   (device == "CSX" ? " (CSX needs Cerebras hardware)" : ""));
  if (!r.count("params")) throw CliError("--params is required (see zoo --help)");
  if (!r.count("mode")) throw CliError("--mode is required: train, eval, train_and_eval or eval_all");
  c.params_file = r["params"].as<std::string>();
  YAML::Node& ov = c.runconfig_overrides;
  ov["target_device"] = device;
  ov["mode"] = r["mode"].as<std::string>();
  if (r.count("model_dir")) ov["model_dir"] = r["model_dir"].as<std::string>();
  for (const auto& k : kStringFlags)
    if (r.count(k)) ov[k] = r[k].as<std::string>();
  for (const auto& k : kIntFlags)
    if (r.count(k)) ov[k] = r[k].as<int64_t>();
  for (const auto& k : kBoolFlags)
    if (r.count(k)) ov[k] = true;
  return c;
}

}  // namespace zoo
