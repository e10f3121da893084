// The parts of tokenizer files that every BPE reader shares: reading JSON
// with errors that name the file, vocabularies, merges and added tokens.
// Defines: read_text_file, parse_json_file, the field readers (string_or,
// bool_or, int_or, number_or, string_at, type_of, steps_of), read_vocab, read_merges,
// AddedToken, read_added_tokens.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace zoo::text {

// `what` says which file the caller expected ("tokenizer file (tokenizer.json)").
std::string read_text_file(const std::string& path, const char* what);
nlohmann::json parse_json_file(const std::string& path, const char* what);

// Fields of a JSON object; a value of the wrong type is an error naming `where`.key and what was expected.
// The *_or readers return `fallback` when the key is absent or null.
std::string string_or(const nlohmann::json& node, const char* key, const std::string& fallback,
                      const std::string& where);
bool bool_or(const nlohmann::json& node, const char* key, bool fallback, const std::string& where);
int64_t int_or(const nlohmann::json& node, const char* key, int64_t fallback, const std::string& where);
double number_or(const nlohmann::json& node, const char* key, double fallback, const std::string& where);  // finite
std::string string_at(const nlohmann::json& node, const char* key, const std::string& where);
// How deeply arrays and objects nest in `j` (0 for a scalar), counted without recursion, stopping past `limit`.
size_t json_depth(const nlohmann::json& j, size_t limit);
// A component's "type" (the node must be an object that has one).
std::string type_of(const nlohmann::json& node, const std::string& where);
// A component's steps: the items of a {"type": "Sequence", list_key: [...]}, the node itself, or none for null.
std::vector<nlohmann::json> steps_of(const nlohmann::json& node, const char* list_key, const std::string& where);

// An object of token -> non-negative id; `where` names it in errors.
std::unordered_map<std::string, int32_t> read_vocab(const nlohmann::json& j, const std::string& where);
// "left right" strings (GPT-2's vocab.bpe lines, older tokenizer.json) or [left, right] pairs.
std::pair<std::string, std::string> read_merge(const nlohmann::json& m, const std::string& where);
std::vector<std::pair<std::string, std::string>> read_merges(const nlohmann::json& list, const std::string& where);

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool normalized = false;              // matched in the normalized text rather than the raw one
  bool lstrip = false, rstrip = false;  // takes in the whitespace on its left / right
  bool single_word = false;             // only where no word character touches it
};
// tokenizer.json's added_tokens list: ids are 0 .. 2^31-1, contents non-empty.
std::vector<AddedToken> read_added_tokens(const nlohmann::json& list, const std::string& where);

}  // namespace zoo::text
