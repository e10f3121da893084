// The `zoo config ...` and `zoo checkpoint ...` command lines.
#include <algorithm>
#include <cstdlib>
#include <cxxopts.hpp>
#include <map>

#include "runner/cli_options.h"

namespace zoo {

namespace {

const char* kConfigHelp =
    "zoo config convert-legacy IN.yaml OUT.yaml\n"
    "  Writes the legacy params file IN (train_input, eval_input, model, optimizer, runconfig) in modelzoo's\n"
    "  Trainer format (trainer: init/fit/validate/validate_all) to OUT, which must not exist yet. zoo reads\n"
    "  OUT back and checks that it resolves to the same params as IN.\n"
    "zoo config diff A.yaml B.yaml\n"
    "  Reads both as a run reads them (legacy or Trainer format, defaults applied) and lists every key whose\n"
    "  value differs or that only one has. Exit 0 when they resolve to the same params, 1 otherwise.\n"
    "zoo config stats P.yaml [--ranks N]\n"
    "  Parameters, FLOPs per token and per step, tokens per step and model state per device for the\n"
    "  runconfig's sharding at N data-parallel ranks (default: WORLD_SIZE, else 1), with the model built on\n"
    "  the meta device: no weights allocated.\n";

const char* kCheckpointHelp =
    "zoo checkpoint info CKPT [--json] [--verify]\n"
    "  What a checkpoint holds: kind, step, the model its params describe, tensors by dtype, optimizer state,\n"
    "  grad scaler, LoRA adapters, shards, the tokenizer beside it. Reads headers and the pickle, not the\n"
    "  tensors; --verify also reads every tensor to check the checksums. CKPT: a zoo checkpoint, a sharded\n"
    "  one's index, a torch.save'd file, model.safetensors, its index json or their directory. Exit 1 when a\n"
    "  checksum fails or shards are missing.\n"
    "zoo checkpoint diff A.mdl B.mdl [--rtol R --atol A --exact --keys REGEX --metadata]\n"
    "  Compares two checkpoints entry by entry; exit 0 when equal or close (see zoo checkpoint diff --help).\n"
    "zoo checkpoint list MODEL_DIR [--json] [--checkpoint_name TEMPLATE]\n"
    "  The run's checkpoints by step, their sizes, which are complete (eval_all reads them all; train resumes\n"
    "  from the newest), and what interrupted saves left behind. Exit 1 when one is not complete.\n"
    "zoo checkpoint delete CKPT          the checkpoint and its shards (or an interrupted save's .shards/)\n"
    "zoo checkpoint copy CKPT DEST       DEST: a new file name or a directory; shards travel with their index\n"
    "zoo checkpoint move CKPT DEST\n"
    "  Copy and move never overwrite, and land the checkpoint's file last: an interrupted copy is never\n"
    "  mistaken for a checkpoint.\n"
    "zoo checkpoint consolidate IN.mdl OUT.mdl\n"
    "  Writes the checkpoint IN (a sharded one's index, with its IN.shards/ beside it, as runconfig.sharding:\n"
    "  full writes them) as one file OUT that Python's torch.load opens, holding what an unsharded run saves.\n"
    "  OUT must not exist yet.\n";

// zoo GROUP SUBCOMMAND IN OUT: `help` for --help, an error quoting it for anything else.
CliCommand parse_in_out(const std::vector<std::string>& args, const std::string& subcommand, CliCommand::Kind kind,
                        const std::string& help) {
  if (args.size() >= 2 && (args[1] == "--help" || args[1] == "-h")) throw CliHelp(help);
  if (args.size() >= 3 && (args[2] == "--help" || args[2] == "-h")) throw CliHelp(help);
  if (args.size() != 4 || args[1] != subcommand) throw CliError("zoo " + args[0] + ": expected\n" + help);
  CliCommand c;
  c.kind = kind;
  c.params_file = args[2];
  c.output_file = args[3];
  return c;
}

CliCommand parse_checkpoint_diff(const std::vector<std::string>& args) {
  cxxopts::Options o("zoo checkpoint diff",
                     "Compare two checkpoints entry by entry (model tensors, optimizer state, "
                     "step, ...): keys in one only, shape or dtype mismatches, and the largest "
                     "difference and mean squared error of each tensor that differs. Exit 0 when "
                     "all are equal or close (torch.allclose), 1 otherwise.");
  o.add_options()("a", "The first checkpoint (a zoo .mdl, a sharded checkpoint's index or a torch.save'd file).",
                  cxxopts::value<std::string>())("b", "The second checkpoint.", cxxopts::value<std::string>())(
      "rtol", "Relative tolerance, as torch.allclose's.", cxxopts::value<double>()->default_value("1e-5"))(
      "atol", "Absolute tolerance, as torch.allclose's.", cxxopts::value<double>()->default_value("1e-8"))(
      "exact", "Equal only: no tolerance.")(
      "keys", "Compare only the entries whose name matches this regular expression (e.g. '^model\\.').",
      cxxopts::value<std::string>()->default_value(""))(
      "metadata", "Compare __metadata__ too (its params name the model_dir, so two runs' differ).")("h,help",
                                                                                                    "Print this help.");
  o.parse_positional({"a", "b"});
  o.positional_help("A.mdl B.mdl");
  std::vector<std::string> rest(args.begin() + 2, args.end());
  const cxxopts::ParseResult r = parse_options(o, "zoo checkpoint diff", rest);
  if (!r.count("a") || !r.count("b") || !r.unmatched().empty())
    throw CliError("zoo checkpoint diff: expected two checkpoints, A and B (see zoo checkpoint diff --help)");
  CliCommand c;
  c.kind = CliCommand::Kind::checkpoint_diff;
  ckpt::CheckpointDiffCommand& d = c.checkpoint_diff;
  d.a = r["a"].as<std::string>();
  d.b = r["b"].as<std::string>();
  d.rtol = r["rtol"].as<double>();
  d.atol = r["atol"].as<double>();
  if (!(d.rtol >= 0) || !(d.atol >= 0)) throw CliError("zoo checkpoint diff: --rtol and --atol must be numbers >= 0");
  d.exact = r.count("exact") > 0;
  d.keys = r["keys"].as<std::string>();
  d.metadata = r.count("metadata") > 0;
  return c;
}

// zoo GROUP SUB OPERANDS... [flags]: `flags` are the booleans it takes, `valued` the flags with a value.
struct ToolArgs {
  std::vector<std::string> operands;
  std::map<std::string, std::string> flags;
};
ToolArgs tool_args(const std::vector<std::string>& args, const std::vector<std::string>& flags,
                   const std::vector<std::string>& valued, const std::string& help) {
  ToolArgs out;
  const std::string prog = "zoo " + args[0] + " " + args[1];
  for (size_t i = 2; i < args.size(); ++i) {
    std::string a = args[i], value;
    if (a == "--help" || a == "-h") throw CliHelp(help);
    if (a.rfind("--", 0) != 0) {
      out.operands.push_back(a);
      continue;
    }
    a = a.substr(2);
    if (const size_t eq = a.find('='); eq != std::string::npos) value = a.substr(eq + 1), a.resize(eq);
    if (std::find(flags.begin(), flags.end(), a) != flags.end()) {
      out.flags[a] = "true";
    } else if (std::find(valued.begin(), valued.end(), a) != valued.end()) {
      if (value.empty() && i + 1 < args.size()) value = args[++i];
      if (value.empty()) throw CliError(prog + ": --" + a + " needs a value");
      out.flags[a] = value;
    } else {
      throw CliError(prog + ": unknown option --" + a + "\n" + help);
    }
  }
  return out;
}

CliCommand tool_command(tools::ToolCommand::Kind kind, const ToolArgs& a, size_t operands,
                        const std::vector<std::string>& args, const std::string& usage, const std::string& help) {
  if (a.operands.size() != operands)
    throw CliError("zoo " + args[0] + " " + args[1] + ": expected " + usage + "\n" + help);
  CliCommand c;
  c.kind = CliCommand::Kind::tool;
  c.tool.kind = kind;
  c.tool.paths = a.operands;
  c.tool.json = a.flags.count("json") > 0;
  c.tool.verify = a.flags.count("verify") > 0;
  if (a.flags.count("checkpoint_name")) c.tool.checkpoint_name = a.flags.at("checkpoint_name");
  if (a.flags.count("ranks")) {
    const std::string& v = a.flags.at("ranks");
    char* end = nullptr;
    c.tool.ranks = std::strtoll(v.c_str(), &end, 10);
    if (*end != '\0' || c.tool.ranks < 1)
      throw CliError("zoo config stats: --ranks expects an integer >= 1, got '" + v + "'");
  }
  return c;
}

}  // namespace

CliCommand parse_config(const std::vector<std::string>& args) {
  using K = tools::ToolCommand::Kind;
  const std::string sub = args.size() >= 2 ? args[1] : "";
  if (sub == "diff")
    return tool_command(K::config_diff, tool_args(args, {}, {}, kConfigHelp), 2, args, "A.yaml B.yaml", kConfigHelp);
  if (sub == "stats")
    return tool_command(K::config_stats, tool_args(args, {}, {"ranks"}, kConfigHelp), 1, args, "P.yaml", kConfigHelp);
  return parse_in_out(args, "convert-legacy", CliCommand::Kind::convert_legacy, kConfigHelp);
}

CliCommand parse_checkpoint(const std::vector<std::string>& args) {
  using K = tools::ToolCommand::Kind;
  const std::string sub = args.size() >= 2 ? args[1] : "";
  const std::string& h = kCheckpointHelp;
  if (sub == "diff") return parse_checkpoint_diff(args);
  if (sub == "info")
    return tool_command(K::checkpoint_info, tool_args(args, {"json", "verify"}, {}, h), 1, args, "CKPT", h);
  if (sub == "list")
    return tool_command(K::checkpoint_list, tool_args(args, {"json"}, {"checkpoint_name"}, h), 1, args, "MODEL_DIR", h);
  if (sub == "delete") return tool_command(K::checkpoint_delete, tool_args(args, {}, {}, h), 1, args, "CKPT", h);
  if (sub == "copy") return tool_command(K::checkpoint_copy, tool_args(args, {}, {}, h), 2, args, "CKPT DEST", h);
  if (sub == "move") return tool_command(K::checkpoint_move, tool_args(args, {}, {}, h), 2, args, "CKPT DEST", h);
  return parse_in_out(args, "consolidate", CliCommand::Kind::consolidate, h);
}

}  // namespace zoo
