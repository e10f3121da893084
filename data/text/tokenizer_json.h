// The parts of tokenizer files that every BPE reader shares: reading JSON
// with errors that name the file, vocabularies, merges and added tokens.
// Defines: read_text_file, parse_json_file, read_vocab, read_merges, AddedToken, read_added_tokens.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace zoo::text {

// `what` says which file the caller expected ("tokenizer file (tokenizer.json)").
std::string read_text_file(const std::string& path, const char* what);
nlohmann::json parse_json_file(const std::string& path, const char* what);

// An object of token -> non-negative id; `where` names it in errors.
std::unordered_map<std::string, int32_t> read_vocab(const nlohmann::json& j, const std::string& where);
// "left right" strings (GPT-2's vocab.bpe lines, older tokenizer.json) or [left, right] pairs.
std::pair<std::string, std::string> read_merge(const nlohmann::json& m, const std::string& where);
std::vector<std::pair<std::string, std::string>> read_merges(const nlohmann::json& list, const std::string& where);

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
};
// tokenizer.json's added_tokens list.
std::vector<AddedToken> read_added_tokens(const nlohmann::json& list, const std::string& where);

}  // namespace zoo::text
