// zoo's everyday commands between runs: `zoo checkpoint info|list|delete|
// copy|move`, `zoo config diff|stats` and `zoo convert --list` (`zoo
// checkpoint diff` and `consolidate` live in runner/checkpoint/). Each
// returns the process's exit code. Defines: ToolCommand, run_tool,
// checkpoint_list, checkpoint_delete, checkpoint_copy, checkpoint_move,
// config_diff, config_stats.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace zoo::tools {

struct ToolCommand {
  enum class Kind {
    checkpoint_info,
    checkpoint_list,
    checkpoint_delete,
    checkpoint_copy,
    checkpoint_move,
    config_diff,
    config_stats,
    convert_list
  };
  Kind kind = Kind::checkpoint_info;
  std::vector<std::string> paths;                         // the command's operands, in order
  bool json = false;                                      // info, list: print JSON for scripts
  bool verify = false;                                    // info: read every tensor to check the checksums
  std::string checkpoint_name = "checkpoint_{step}.mdl";  // list: how the run names its checkpoints
  int64_t ranks = 0;                                      // config stats: data-parallel ranks (0: WORLD_SIZE, else 1)
};

int run_tool(const ToolCommand& command, std::ostream& out);

// Each throws std::runtime_error naming the file and what was expected.
int checkpoint_list(const ToolCommand& command, std::ostream& out);
int checkpoint_delete(const std::string& path, std::ostream& out);
int checkpoint_copy(const std::string& from, const std::string& to, std::ostream& out);
int checkpoint_move(const std::string& from, const std::string& to, std::ostream& out);
// Exit 0 when both files resolve to the same params (defaults applied, either layout), 1 otherwise.
int config_diff(const std::string& a, const std::string& b, std::ostream& out);
int config_stats(const std::string& params_file, int64_t ranks, std::ostream& out);

}  // namespace zoo::tools
