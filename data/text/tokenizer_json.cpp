// Implementation of data/text/tokenizer_json.h.
#include "data/text/tokenizer_json.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace zoo::text {

std::string read_text_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(path + ": cannot open the " + what);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json parse_json_file(const std::string& path, const char* what) {
  try {
    return nlohmann::json::parse(read_text_file(path, what));
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument(path + ": not valid JSON (" + e.what() + ")");
  }
}

namespace {
const nlohmann::json* field(const nlohmann::json& node, const char* key) {
  if (!node.is_object()) return nullptr;
  const auto it = node.find(key);
  return it == node.end() || it->is_null() ? nullptr : &*it;
}
[[noreturn]] void wrong_type(const nlohmann::json& value, const char* key, const char* expected,
                             const std::string& where) {
  throw std::invalid_argument(where + "." + key + ": expected " + expected + ", got " + value.dump().substr(0, 200));
}
}  // namespace

std::string string_or(const nlohmann::json& node, const char* key, const std::string& fallback,
                      const std::string& where) {
  const auto* v = field(node, key);
  if (!v) return fallback;
  if (!v->is_string()) wrong_type(*v, key, "a string", where);
  return v->get<std::string>();
}

bool bool_or(const nlohmann::json& node, const char* key, bool fallback, const std::string& where) {
  const auto* v = field(node, key);
  if (!v) return fallback;
  if (!v->is_boolean()) wrong_type(*v, key, "true or false", where);
  return v->get<bool>();
}

int64_t int_or(const nlohmann::json& node, const char* key, int64_t fallback, const std::string& where) {
  const auto* v = field(node, key);
  if (!v) return fallback;
  if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX))
    wrong_type(*v, key, "an integer", where);
  return v->get<int64_t>();
}

double number_or(const nlohmann::json& node, const char* key, double fallback, const std::string& where) {
  const auto* v = field(node, key);
  if (!v) return fallback;
  if (!v->is_number() || !std::isfinite(v->get<double>())) wrong_type(*v, key, "a finite number", where);
  return v->get<double>();
}

std::string string_at(const nlohmann::json& node, const char* key, const std::string& where) {
  const auto* v = field(node, key);
  if (!v) throw std::invalid_argument(where + "." + key + ": missing (expected a string)");
  if (!v->is_string()) wrong_type(*v, key, "a string", where);
  return v->get<std::string>();
}

size_t json_depth(const nlohmann::json& j, size_t limit) {
  std::vector<std::pair<const nlohmann::json*, size_t>> stack = {{&j, 0}};
  size_t deepest = 0;
  while (!stack.empty()) {
    const auto [node, depth] = stack.back();
    stack.pop_back();
    if (!node->is_structured()) continue;
    deepest = std::max(deepest, depth + 1);
    if (deepest > limit) return deepest;
    for (const auto& child : *node) stack.emplace_back(&child, depth + 1);
  }
  return deepest;
}

std::string type_of(const nlohmann::json& node, const std::string& where) {
  if (!node.is_object())
    throw std::invalid_argument(where + ": expected an object with a \"type\", got " + node.dump().substr(0, 200));
  return string_at(node, "type", where);
}

std::vector<nlohmann::json> steps_of(const nlohmann::json& node, const char* list_key, const std::string& where) {
  if (node.is_null()) return {};
  if (type_of(node, where) != "Sequence") return {node};
  const auto* list = field(node, list_key);
  if (!list || !list->is_array()) throw std::invalid_argument(where + "." + list_key + ": expected a list of steps");
  return list->get<std::vector<nlohmann::json>>();
}

std::unordered_map<std::string, int32_t> read_vocab(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw std::invalid_argument(where + ": expected an object of token -> id");
  std::unordered_map<std::string, int32_t> vocab;
  for (const auto& [token, id] : j.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      throw std::invalid_argument(where + ": token '" + token + "' has id " + id.dump() +
                                  ", expected a non-negative integer");
    vocab[token] = id.get<int32_t>();
  }
  return vocab;
}

std::pair<std::string, std::string> read_merge(const nlohmann::json& m, const std::string& where) {
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string())
    return {m[0].get<std::string>(), m[1].get<std::string>()};
  const std::string line = m.is_string() ? m.get<std::string>() : std::string();
  const auto space = line.find(' ');
  if (space == std::string::npos || space == 0 || space + 1 >= line.size() ||
      line.find(' ', space + 1) != std::string::npos)
    throw std::invalid_argument(where + ": expected a merge \"left right\" or [left, right], got " + m.dump());
  return {line.substr(0, space), line.substr(space + 1)};
}

std::vector<std::pair<std::string, std::string>> read_merges(const nlohmann::json& list, const std::string& where) {
  if (!list.is_array()) throw std::invalid_argument(where + ": expected a list of merges");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(list.size());
  for (const auto& m : list) merges.push_back(read_merge(m, where));
  return merges;
}

std::vector<AddedToken> read_added_tokens(const nlohmann::json& list, const std::string& where) {
  std::vector<AddedToken> tokens;
  if (list.is_null()) return tokens;
  if (!list.is_array()) throw std::invalid_argument(where + ": expected a list of {id, content, special}");
  for (const auto& t : list) {
    const std::string item = where + "[" + std::to_string(tokens.size()) + "]";
    if (!t.is_object())
      throw std::invalid_argument(item + ": expected {\"id\": N, \"content\": \"text\", ...}, got " +
                                  t.dump().substr(0, 200));
    AddedToken a;
    a.content = string_at(t, "content", item);
    const int64_t id = int_or(t, "id", -1, item);
    if (!t.contains("id") || id < 0 || id > INT32_MAX)
      throw std::invalid_argument(item + ".id: expected an id from 0 to 2147483647, got " +
                                  t.value("id", nlohmann::json()).dump());
    if (a.content.empty()) throw std::invalid_argument(item + ".content: an added token needs text");
    a.id = static_cast<int32_t>(id);
    a.special = bool_or(t, "special", false, item);
    a.normalized = bool_or(t, "normalized", !a.special, item);
    a.lstrip = bool_or(t, "lstrip", false, item);
    a.rstrip = bool_or(t, "rstrip", false, item);
    a.single_word = bool_or(t, "single_word", false, item);
    tokens.push_back(std::move(a));
  }
  return tokens;
}

}  // namespace zoo::text
