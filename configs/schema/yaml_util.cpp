// Implementation of configs/schema/yaml_util.h.
#include "configs/schema/yaml_util.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace zoo::config {

static YAML::Node load(const std::string& text, const std::string& name) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw ConfigError(name + ":" + std::to_string(e.mark.line + 1) + ":" +
                      std::to_string(e.mark.column + 1) + ": YAML syntax error: " + e.msg);
  }
}

YAML::Node load_yaml_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot read params file (does it exist?)");
  std::stringstream ss;
  ss << in.rdbuf();
  return load(ss.str(), path);
}

YAML::Node load_yaml_string(const std::string& text, const std::string& name) {
  return load(text, name);
}

void write_yaml_file(const std::string& path, const YAML::Node& node) {
  YAML::Emitter e;
  e << node;
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw ConfigError(path + ": cannot write file");
    out << e.c_str() << "\n";
    if (!out.flush()) throw ConfigError(path + ": write failed");
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
