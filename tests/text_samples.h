// Texts and tokenizer files the tokenizer tests share: fixed texts with
// whitespace runs, accents, CJK, emoji and special-token strings, random
// texts, and GPT-2's files rewritten as a Hugging Face tokenizer.json.
#pragma once

#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace zoo::testing {

// Random text from scripts both engines agree on (Unicode 14 and earlier,
// whitespace other than U+0085 and U+FEFF, which JS's \s and Unicode's
// White_Space, used by PCRE2 and Python, class differently).
inline std::string random_text(std::mt19937& rng, int code_points) {
  static const std::vector<std::pair<uint32_t, uint32_t>> ranges = {
      {0x20, 0x7E},       {0x20, 0x7E},     {0x20, 0x7E},     {'\n', '\n'},   {'\t', '\t'},     {0xA0, 0xFF},
      {0x300, 0x36F},     {0x391, 0x3C9},   {0x410, 0x44F},   {0x660, 0x669}, {0x4E00, 0x4E80}, {0xAC00, 0xAC40},
      {0x1F600, 0x1F64F}, {0x2000, 0x200A}, {0x3000, 0x3000}, {'0', '9'},     {'\'', '\''}};
  std::string s;
  for (int i = 0; i < code_points; ++i) {
    const auto& [lo, hi] = ranges[rng() % ranges.size()];
    const uint32_t cp = lo + rng() % (hi - lo + 1);
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else if (cp < 0x800) {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += static_cast<char>(0xE0 | (cp >> 12));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      s += static_cast<char>(0xF0 | (cp >> 18));
      s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return s;
}

inline const std::vector<std::string>& fixed_texts() {
  static const std::vector<std::string> texts = {
      "Hello world",
      "The quick brown fox jumps over the lazy dog.",
      " leading space and trailing space ",
      "It's, they're, we've, I'm, you'll, he'd -- contractions",
      "Numbers: 3.14159, 42, 1,000,000 and 2023-10-05",
      "tabs\tand\nnew\n\nlines\r\n  indented   spaces    ",
      "Unicode: naïve café, Ærøskøbing, Straße, 東京, 서울, Москва, Ελληνικά",
      "emoji 😀🎉👍🏽 and symbols ©®™ §¶ ±×÷",
      "code: for (int i = 0; i < n; ++i) { x[i] += y[i] * 2; }",
      "<|endoftext|> is text to GPT-2's plain encoder",
      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
      "'''''' ''s 'S 'LL ?!?!... ---",
      "",
  };
  return texts;
}

// GPT-2's files rewritten as a Hugging Face tokenizer.json.
inline nlohmann::json gpt2_tokenizer_json(const std::string& dir) {
  nlohmann::json vocab = nlohmann::json::parse(read_file(dir + "/encoder.json"));
  nlohmann::json merges = nlohmann::json::array();
  std::istringstream lines(read_file(dir + "/vocab.bpe"));
  std::string line;
  std::getline(lines, line);  // #version
  while (std::getline(lines, line))
    if (!line.empty()) merges.push_back(line);
  nlohmann::json j;
  j["version"] = "1.0";
  j["added_tokens"] = {{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}}};
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  j["decoder"] = {{"type", "ByteLevel"}};
  j["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"vocab", vocab}, {"merges", merges}};
  return j;
}

}  // namespace zoo::testing
