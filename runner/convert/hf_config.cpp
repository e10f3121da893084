// Implementation of runner/convert/hf_config.h.
#include "runner/convert/hf_config.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <stdexcept>

namespace zoo::convert {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_count(const std::string& key) {
  if (key.rfind("num_", 0) == 0 || key.rfind("n_", 0) == 0) return true;
  for (const char* suffix : {"_size", "_dim", "_layers", "_heads", "_embeddings", "_positions", "_experts", "_window"})
    if (ends_with(key, suffix)) return true;
  return false;
}

bool is_head_count(const std::string& key) { return key == "n_head" || ends_with(key, "_heads"); }

// Checks the counts of one object and of the objects inside it (text_config, vision_config, ...).
void check_counts(const nlohmann::json& object, const std::string& path, const std::string& prefix, int depth) {
  for (const auto& [key, value] : object.items()) {
    const std::string where = prefix + key;
    if (value.is_object() && depth < 4) check_counts(value, path, where + ".", depth + 1);
    if (!value.is_number() || !is_count(key)) continue;
    const bool whole = value.is_number_integer() ||
                       (value.get<double>() == static_cast<double>(static_cast<int64_t>(value.get<double>())));
    if (!whole || value.get<double>() < 0)
      throw std::runtime_error(path + ": " + where + ": expected a whole number >= 0, got " + value.dump());
    if (is_head_count(key) && value.get<double>() < 1)
      throw std::runtime_error(path + ": " + where + ": expected at least 1 head, got " + value.dump());
  }
}

}  // namespace

nlohmann::json read_json_object(const std::string& path, const std::string& expected) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(path + ": cannot read (expected " + expected + ")");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw std::runtime_error(path + ": expected a JSON object: " + expected);
  return j;
}

nlohmann::json read_config_json(const std::string& path) {
  nlohmann::json config = read_json_object(path, "the Hugging Face config.json; pass --config");
  check_counts(config, path, "", 0);
  return config;
}

std::string describe_config_error(const nlohmann::json::exception& e, const nlohmann::json& config) {
  const std::string what = e.what();
  std::smatch m;
  // "[json.exception.type_error.302] (/rope_scaling/factor) type must be number, but is string"
  if (std::regex_search(what, m, std::regex(R"(\] \((/[^)]*)\) (.*))"))) {
    std::string key = m[1].str().substr(1);
    std::replace(key.begin(), key.end(), '/', '.');
    const nlohmann::json::json_pointer pointer(m[1].str());
    const std::string value = config.contains(pointer) ? config.at(pointer).dump() : "nothing";
    return key + ": " + m[2].str() + " (got " + value + ")";
  }
  if (std::regex_search(what, m, std::regex(R"(key '([^']*)' not found)"))) return "missing key " + m[1].str();
  if (std::regex_search(what, m, std::regex(R"(cannot use (\w+)\(\) with (\w+))")))
    return "a setting is a " + m[2].str() + " where the converter expects an object";
  return what;
}

}  // namespace zoo::convert
