// Implementation of data/text/tokenizer_json.h.
#include "data/text/tokenizer_json.h"

#include <climits>
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
    if (!t.is_object() || !t.contains("content") || !t["content"].is_string() || !t.contains("id") ||
        !t["id"].is_number_integer() || t["content"].get<std::string>().empty())
      throw std::invalid_argument(where + ": expected {\"id\": N, \"content\": \"text\", ...}, got " + t.dump());
    tokens.push_back({t["content"].get<std::string>(), t["id"].get<int32_t>(), t.value("special", false)});
  }
  return tokens;
}

}  // namespace zoo::text
