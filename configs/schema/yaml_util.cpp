// Implementation of configs/schema/yaml_util.h.
#include "configs/schema/yaml_util.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace zoo::config {

namespace {

std::string flow(const YAML::Node& node) {
  YAML::Emitter e;
  e << YAML::Flow << node;
  return e.c_str();
}

// YAML loaders keep one of two equal keys without a word (yaml-cpp's lookup
// finds the first, PyYAML's the last), so a second `eval_input:` or a stray
// line that repeats a key silently drops settings; and a mapping used as a
// key fails later as a bare "bad conversion". Both are errors here, for every
// mapping in the file, naming the line and the key path. A key repeated with
// the same value loses nothing (real modelzoo configs have such lines): a
// warning, and one copy is kept.
void check_keys(YAML::Node node, const Context& ctx) {
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) check_keys(node[i], ctx.child(std::to_string(i)));
    return;
  }
  if (!node.IsMap()) return;
  std::map<std::string, std::pair<YAML::Mark, YAML::Node>> seen;
  std::vector<std::string> repeated;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar())
      ctx.fail(kv.first, "",
               "found " + describe_node(kv.first) +
                   " where a key belongs; expected `key: value` (check the "
                   "indentation and brackets of this line)");
    const std::string key = kv.first.Scalar();
    auto [first, inserted] = seen.emplace(key, std::make_pair(kv.first.Mark(), kv.second));
    const std::string first_line = std::to_string(first->second.first.line + 1);
    if (!inserted && flow(first->second.second) != flow(kv.second))
      ctx.fail(kv.first, key,
               "duplicate key (first given at line " + first_line +
                   " with another value; a YAML mapping keeps only one, so remove or rename one "
                   "of them)");
    if (!inserted) {
      ctx.warn(kv.second, key, "repeats the key of line " + first_line + " with the same value; one is kept");
      repeated.push_back(key);
      continue;
    }
    check_keys(kv.second, ctx.child(key));
  }
  for (const std::string& key : repeated) node.remove(key);  // the first of the equal pair
}

// Aliases share their anchor's node, so a file can describe a loop
// (`model: &x {a: *x}`) or a tree exponentially larger than itself (each
// level aliasing the one below nine times). Every later walk of the params
// (merge keys, the duplicate check, the schema) would then overflow the
// stack or run for days: one bounded walk first refuses both, naming the
// key path where the walk stopped. Real params files hold a few hundred
// values and nest under ten levels.
constexpr size_t kMaxYamlValues = 100000;
constexpr size_t kMaxYamlDepth = 64;
constexpr uintmax_t kMaxParamsFileBytes = uintmax_t{16} << 20;

void check_bounded(const YAML::Node& node, const Context& ctx, std::vector<YAML::Node>& ancestors, size_t& values) {
  if (++values > kMaxYamlValues)
    ctx.fail(node, "",
             "the file expands to more than " + std::to_string(kMaxYamlValues) +
                 " values through its aliases (*name); a params file needs a few hundred, so an alias is "
                 "repeated far more often than intended");
  if (!node.IsMap() && !node.IsSequence()) return;
  for (const YAML::Node& a : ancestors)
    if (a.is(node))
      ctx.fail(node, "",
               "an alias (*name) refers to a mapping or list that contains it, a loop that no params "
               "file can hold; give the values here instead");
  if (ancestors.size() >= kMaxYamlDepth)
    ctx.fail(node, "",
             "nested more than " + std::to_string(kMaxYamlDepth) + " levels deep; a params file needs under ten");
  ancestors.push_back(node);
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) check_bounded(node[i], ctx.child(std::to_string(i)), ancestors, values);
  } else {
    for (const auto& kv : node) {
      check_bounded(kv.first, ctx, ancestors, values);
      check_bounded(kv.second, ctx.child(kv.first.IsScalar() ? kv.first.Scalar() : "?"), ancestors, values);
    }
  }
  ancestors.pop_back();
}

// YAML's merge key (`<<: *anchor`, or a list of anchors), which PyYAML reads
// and yaml-cpp leaves as a key named "<<": the mapping gets every key of the
// merged mappings that it does not give itself (an earlier mapping in the
// list wins over a later one), and "<<" goes.
void expand_merge_keys(YAML::Node node, const Context& ctx) {
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) expand_merge_keys(node[i], ctx.child(std::to_string(i)));
    return;
  }
  if (!node.IsMap()) return;
  YAML::Node merged;
  bool has_merge = false;
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) continue;  // check_keys reports it
    if (kv.first.Scalar() == "<<") {
      merged = kv.second;
      has_merge = true;
    } else {
      expand_merge_keys(kv.second, ctx.child(kv.first.Scalar()));
    }
  }
  if (!has_merge) return;
  std::vector<YAML::Node> sources;
  if (merged.IsSequence())
    for (const auto& m : merged) sources.push_back(m);
  else sources.push_back(merged);
  for (const auto& source : sources)
    if (!source.IsMap())
      ctx.fail(merged, "<<",
               "a merge key takes a mapping (e.g. *anchor) or a list of them, got " + describe_node(source));
  node.remove("<<");
  const YAML::Node& given = node;  // const lookups: they never add a key
  for (const auto& source : sources) {
    expand_merge_keys(source, ctx);
    for (const auto& kv : source)
      if (!given[kv.first.Scalar()]) node[kv.first] = kv.second;
  }
}

YAML::Node load(const std::string& text, const std::string& name, std::vector<std::string>* warnings) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(name + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                      ": YAML syntax error: " + e.msg);
  }
  std::vector<YAML::Node> ancestors;
  size_t values = 0;
  check_bounded(root, Context{name, "", warnings}, ancestors, values);
  expand_merge_keys(root, Context{name, "", warnings});
  check_keys(root, Context{name, "", warnings});
  return root;
}

}  // namespace

YAML::Node load_yaml_file(const std::string& path, std::vector<std::string>* warnings) {
  // A FIFO would block the read forever and a device (/dev/zero) never ends.
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || status.type() == std::filesystem::file_type::not_found)
    throw ConfigError(path + ": cannot read params file (does it exist?)");
  if (status.type() != std::filesystem::file_type::regular)
    throw ConfigError(path +
                      ": not a regular file (a pipe, device or directory); a params file is a YAML file on disk");
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxParamsFileBytes)
    throw ConfigError(path + ": " + std::to_string(size) + " bytes, over the " +
                      std::to_string(kMaxParamsFileBytes >> 20) +
                      " MiB a params file may have; is this the right file?");
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot read params file (" + std::strerror(errno) + ")");
  std::stringstream ss;
  ss << in.rdbuf();
  return load(ss.str(), path, warnings);
}

YAML::Node load_yaml_string(const std::string& text, const std::string& name, std::vector<std::string>* warnings) {
  return load(text, name, warnings);
}

void write_yaml_file(const std::string& path, const YAML::Node& node, const std::string& comment) {
  YAML::Emitter e;
  e << node;
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw ConfigError(path + ": cannot write file (" + std::strerror(errno) + ")");
    std::istringstream lines(comment);
    for (std::string line; std::getline(lines, line);) out << "# " << line << "\n";
    out << e.c_str() << "\n";
    if (!out.flush()) {
      const int error = errno;
      out.close();
      std::remove(tmp.c_str());
      throw ConfigError(path + ": write failed (" + std::strerror(error) + ")");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) throw ConfigError(path + ": cannot rename " + tmp);
}

std::string format_field_table(const std::string& title, const std::vector<FieldInfo>& fields) {
  std::ostringstream s;
  s << title << "\n";
  for (const auto& f : fields) {
    s << "  " << f.key << " (" << f.type << ", default " << f.default_text << ")\n";
    s << "      " << f.doc << "\n";
  }
  return s.str();
}

}  // namespace zoo::config
