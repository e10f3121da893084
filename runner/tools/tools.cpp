// Implementation of runner/tools/tools.h: the dispatch, `checkpoint info` and `convert --list`.
#include "runner/tools/tools.h"

#include <algorithm>

#include "models/registry.h"
#include "runner/tools/checkpoint_info.h"

namespace zoo::tools {
namespace {

int checkpoint_info_command(const ToolCommand& c, std::ostream& out) {
  const nlohmann::json info = checkpoint_info({c.paths.at(0), c.json, c.verify});
  if (c.json) out << info.dump(2) << "\n";
  else describe_info(info, out);
  const bool incomplete = info.contains("sharding") && !info.at("sharding").at("complete").get<bool>();
  return info.value("checksum_failed", false) || incomplete ? 1 : 0;
}

// Every converter `zoo convert --model` takes: its family, the config.json model types it reads, what it holds.
int convert_list(std::ostream& out) {
  out << "zoo convert --model NAME (Hugging Face <-> zoo):\n";
  for (const models::ModelFamily* f : models::model_families())
    for (const auto& [name, adapter] : f->hf) {
      std::string types;
      for (const auto& t : adapter.model_types) types += (types.empty() ? "" : ", ") + t;
      out << "  " << name << std::string(name.size() < 26 ? 26 - name.size() : 1, ' ') << "zoo model " << f->name
          << "; config.json model_type " << (types.empty() ? "-" : types)
          << (adapter.description.empty() ? "" : "; " + adapter.description) << "\n";
    }
  out << "modelzoo's names read too: " << models::hf_converter_alias_list() << "\n";
  return 0;
}

}  // namespace

int run_tool(const ToolCommand& c, std::ostream& out) {
  using K = ToolCommand::Kind;
  switch (c.kind) {
    case K::checkpoint_info: return checkpoint_info_command(c, out);
    case K::checkpoint_list: return checkpoint_list(c, out);
    case K::checkpoint_delete: return checkpoint_delete(c.paths.at(0), out);
    case K::checkpoint_copy: return checkpoint_copy(c.paths.at(0), c.paths.at(1), out);
    case K::checkpoint_move: return checkpoint_move(c.paths.at(0), c.paths.at(1), out);
    case K::config_diff: return config_diff(c.paths.at(0), c.paths.at(1), out);
    case K::config_stats: return config_stats(c.paths.at(0), c.ranks, out);
    case K::convert_list: return convert_list(out);
  }
  return 1;
}

}  // namespace zoo::tools
