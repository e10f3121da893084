// `zoo checkpoint list|delete|copy|move`: a checkpoint is its file and, when
// sharded, its <file>.shards/ folder; both travel together, and the file (the
// index that makes a sharded checkpoint complete) always lands last.
#include <filesystem>
#include <iomanip>
#include <system_error>

#include "runner/checkpoint/checkpoint.h"
#include "runner/checkpoint/sharded_checkpoint.h"
#include "runner/parallel/strategy.h"
#include "runner/tools/checkpoint_info.h"
#include "runner/tools/tools.h"

namespace zoo::tools {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The checkpoint at `path`, read as info reads it; a sharded one must have all its shards.
// The checkpoint at `path` as info reads it; an error naming `verb` and what was left alone when it is none.
json readable_checkpoint(const std::string& path, const std::string& verb, const std::string& untouched) {
  try {
    return checkpoint_info({path, false, false});
  } catch (const std::exception& e) {
    throw std::runtime_error("zoo checkpoint " + verb + ": " + path + " is not a checkpoint zoo reads (" + e.what() +
                             "); " + untouched);
  }
}

json complete_checkpoint(const std::string& path, const std::string& verb) {
  if (!fs::is_regular_file(path)) throw std::runtime_error(path + ": no such checkpoint file");
  const json info = readable_checkpoint(path, verb, "nothing was changed");
  if (info.contains("sharding") && !info.at("sharding").at("complete").get<bool>())
    throw std::runtime_error("zoo checkpoint " + verb + ": " + path +
                             " lacks some of its shards (zoo checkpoint info " + path +
                             " lists them); nothing was changed");
  return info;
}

// DIR/<name of from> when `to` is a directory; refuses a target (or its shards) that exists.
std::string target_of(const std::string& from, const std::string& to, const std::string& verb) {
  fs::path target(to);
  if (fs::is_directory(target)) target /= fs::path(from).filename();
  for (const fs::path& p : {target, fs::path(ckpt::shards_dir(target.string()))})
    if (fs::exists(p))
      throw std::runtime_error("zoo checkpoint " + verb + ": " + p.string() +
                               " already exists; zoo does not overwrite a checkpoint (delete it first)");
  if (!target.parent_path().empty() && !fs::is_directory(target.parent_path()))
    throw std::runtime_error("zoo checkpoint " + verb + ": " + target.parent_path().string() + " is not a directory");
  return target.string();
}

void copy_files(const std::string& from, const std::string& target, bool sharded) {
  if (sharded) {
    const std::string partial = ckpt::shards_dir(target) + ".partial";
    fs::remove_all(partial);
    fs::copy(ckpt::shards_dir(from), partial, fs::copy_options::recursive);
    fs::rename(partial, ckpt::shards_dir(target));
  }
  const std::string partial = target + ".partial";
  fs::copy_file(from, partial, fs::copy_options::overwrite_existing);
  fs::rename(partial, target);
}

}  // namespace

int checkpoint_list(const ToolCommand& command, std::ostream& out) {
  const std::string& dir = command.paths.at(0);
  if (!fs::is_directory(dir)) throw std::runtime_error(dir + ": not a directory (zoo checkpoint list MODEL_DIR)");
  const ckpt::CheckpointNaming naming(command.checkpoint_name);
  json rows = json::array();
  int unreadable = 0;
  for (const auto& c : ckpt::list_checkpoints(dir, naming)) {
    json row = {{"path", c.path}, {"step", c.step}};
    try {
      const json info = checkpoint_info({c.path, false, false});
      row["kind"] = info.at("kind");
      row["bytes"] = info.at("bytes");
      const bool complete = !info.contains("sharding") || info.at("sharding").at("complete").get<bool>();
      row["status"] = complete ? "complete" : "incomplete: shards missing";
    } catch (const std::exception& e) {
      row["status"] = std::string("unreadable: ") + e.what();
      row["bytes"] = fs::file_size(c.path);
    }
    unreadable += row.at("status") != "complete";
    rows.push_back(row);
  }
  // What a save left half-way: nothing reads these; `zoo checkpoint delete` removes them.
  json leftovers = json::array();
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string p = e.path().string();
    if (e.is_directory() && ends_with(p, ".shards") && !fs::exists(p.substr(0, p.size() - 7)))
      leftovers.push_back({{"path", p}, {"what", "shards of a save that never wrote its index (interrupted)"}});
    else if (e.is_regular_file() && (ends_with(p, ".mdl.tmp") || ends_with(p, ".partial")))
      leftovers.push_back({{"path", p}, {"what", "a partial write (interrupted)"}});
  }
  if (command.json) {
    out << json{{"model_dir", dir}, {"checkpoints", rows}, {"leftovers", leftovers}}.dump(2) << "\n";
    return unreadable == 0 ? 0 : 1;
  }
  if (rows.empty()) out << dir << ": no checkpoints named as " << command.checkpoint_name << "\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& r = rows[i];
    out << std::setw(10) << r.at("step").get<int64_t>() << "  " << std::setw(11)
        << parallel::memory_text(r.at("bytes").get<double>()) << "  " << r.at("status").get<std::string>() << "  "
        << r.at("path").get<std::string>() << (i + 1 == rows.size() ? "  (newest: train resumes from it)" : "") << "\n";
  }
  if (!rows.empty())
    out << "eval_all reads all " << rows.size()
        << (unreadable ? ", and reports the " + std::to_string(unreadable) + " not complete as failed" : std::string())
        << "\n";
  for (const auto& l : leftovers)
    out << "leftover: " << l.at("path").get<std::string>() << ": " << l.at("what").get<std::string>() << "\n";
  return unreadable == 0 ? 0 : 1;
}

int checkpoint_delete(const std::string& path, std::ostream& out) {
  if (fs::is_directory(path) && ends_with(path, ".shards")) {
    const std::string index = path.substr(0, path.size() - 7);
    if (fs::exists(index))
      throw std::runtime_error("zoo checkpoint delete: " + path + " holds the shards of " + index +
                               "; delete the checkpoint " + index + " instead");
    const auto n = fs::remove_all(path);
    out << "Deleted " << path << " (" << n << " files of an interrupted save)\n";
    return 0;
  }
  const json info = readable_checkpoint(path, "delete", "nothing was deleted");
  // The index first: without it the shards are a leftover nothing reads, never a checkpoint missing its shards.
  fs::remove(path);
  const auto shards = info.contains("sharding") ? fs::remove_all(ckpt::shards_dir(path)) : 0;
  out << "Deleted " << path << (shards ? " and its " + std::to_string(shards - 1) + " shards" : std::string()) << " ("
      << parallel::memory_text(info.at("bytes").get<double>()) << ")\n";
  return 0;
}

int checkpoint_copy(const std::string& from, const std::string& to, std::ostream& out) {
  const json info = complete_checkpoint(from, "copy");
  const std::string target = target_of(from, to, "copy");
  copy_files(from, target, info.contains("sharding"));
  out << "Copied " << from << " to " << target
      << (info.contains("sharding") ? " with its shards in " + ckpt::shards_dir(target) : std::string()) << "\n";
  return 0;
}

int checkpoint_move(const std::string& from, const std::string& to, std::ostream& out) {
  const json info = complete_checkpoint(from, "move");
  const std::string target = target_of(from, to, "move");
  const bool sharded = info.contains("sharding");
  std::error_code ec;
  if (sharded) fs::rename(ckpt::shards_dir(from), ckpt::shards_dir(target), ec);
  if (!ec) fs::rename(from, target, ec);
  if (ec) {
    if (ec != std::errc::cross_device_link)
      throw std::runtime_error("zoo checkpoint move: " + from + " -> " + target + ": " + ec.message());
    if (sharded && fs::exists(ckpt::shards_dir(target)))  // moved already: the copy below reads it from there
      fs::rename(ckpt::shards_dir(target), ckpt::shards_dir(from));
    copy_files(from, target, sharded);  // another file system: copy, then delete the original
    fs::remove(from);
    if (sharded) fs::remove_all(ckpt::shards_dir(from));
  }
  out << "Moved " << from << " to " << target << "\n";
  return 0;
}

}  // namespace zoo::tools
