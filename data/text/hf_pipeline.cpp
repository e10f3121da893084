// Implementation of data/text/hf_pipeline.h.
#include "data/text/hf_pipeline.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "data/text/unicode.h"

namespace zoo::text {

// Leftmost-longest matching of added tokens in a text (a byte trie), with
// each token's lstrip / rstrip / single_word, as the library's
// AddedVocabulary finds them.
class PipelineTokenizer::AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(const std::vector<AddedToken>& tokens) : tokens_(tokens) {
    nodes_.emplace_back();
    for (size_t t = 0; t < tokens_.size(); ++t) {
      int node = 0;
      for (unsigned char c : tokens_[t].content) {
        auto it = nodes_[node].next.find(c);
        if (it == nodes_[node].next.end()) {
          it = nodes_[node].next.emplace(c, static_cast<int>(nodes_.size())).first;
          nodes_.emplace_back();
        }
        node = it->second;
      }
      nodes_[node].token = static_cast<int>(t);
    }
  }
  bool empty() const { return tokens_.empty(); }

  struct Section {
    std::string text;
    std::optional<int32_t> id;  // an added token's id, or none for text to encode
    bool at_start = false;
  };
  // Cuts `text` into added tokens and the stretches between them.
  void split(const std::string& text, bool at_start, std::vector<Section>& out) const {
    size_t done = 0;  // text before this is in `out`
    for (size_t pos = 0; pos < text.size();) {
      int node = 0, found = -1;
      size_t found_end = 0;
      for (size_t i = pos; i < text.size(); ++i) {
        const auto it = nodes_[node].next.find(static_cast<unsigned char>(text[i]));
        if (it == nodes_[node].next.end()) break;
        node = it->second;
        if (nodes_[node].token >= 0) found = nodes_[node].token, found_end = i + 1;
      }
      if (found < 0) {
        ++pos;
        continue;
      }
      const AddedToken& token = tokens_[static_cast<size_t>(found)];
      size_t start = pos, stop = found_end;
      pos = found_end;
      if (token.single_word && (touches_word_before(text, start) || touches_word_after(text, stop))) continue;
      if (token.lstrip)
        while (start > done && is_whitespace(code_point_before(text, start)))
          start -= code_point_length_before(text, start);
      if (token.rstrip)
        for (size_t len = 0; stop < text.size() && is_whitespace(next_code_point(text, stop, len));) stop += len;
      if (start > done) out.push_back({text.substr(done, start - done), std::nullopt, at_start && done == 0});
      out.push_back({text.substr(start, stop - start), token.id, false});
      done = pos = stop;
    }
    if (done < text.size()) out.push_back({text.substr(done), std::nullopt, at_start && done == 0});
  }

 private:
  static size_t code_point_length_before(const std::string& s, size_t end) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) >> 6) == 2 && end - start < 4) --start;
    size_t len = 0;
    next_code_point(s, start, len);
    return start + len == end ? len : 1;
  }
  static char32_t code_point_before(const std::string& s, size_t end) {
    size_t len = 0;
    return next_code_point(s, end - code_point_length_before(s, end), len);
  }
  static bool word_char(char32_t c) { return is_alphanumeric(c) || c == '_'; }
  static bool touches_word_before(const std::string& s, size_t start) {
    return start > 0 && word_char(code_point_before(s, start));
  }
  static bool touches_word_after(const std::string& s, size_t stop) {
    size_t len = 0;
    return stop < s.size() && word_char(next_code_point(s, stop, len));
  }

  struct Node {
    std::unordered_map<unsigned char, int> next;
    int token = -1;
  };
  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
};

PipelineTokenizer::PipelineTokenizer(const nlohmann::json& j, const std::string& path) : path_(path) {
  try {
    build(j);
  } catch (const nlohmann::json::exception& e) {  // a value of a type no reader expected
    throw std::invalid_argument(path + ": " + e.what());
  }
}

void PipelineTokenizer::build(const nlohmann::json& j) {
  const std::string& path = path_;
  if (!j.is_object()) throw std::invalid_argument(path + ": expected a tokenizer.json object");
  if (!j.contains("model")) throw std::invalid_argument(path + ": model: missing (every tokenizer.json has one)");
  // Components nest through Sequences, read recursively: real files nest a few levels.
  for (const char* key : {"normalizer", "pre_tokenizer", "decoder", "post_processor"})
    if (j.contains(key) && json_depth(j[key], 32) > 32)
      throw std::invalid_argument(path + ": " + key + ": nests deeper than 32 levels");
  normalizer_ = hf::make_normalizer(j.value("normalizer", nlohmann::json()), path + ": normalizer");
  pre_tokenizer_ = hf::make_pre_tokenizer(j.value("pre_tokenizer", nlohmann::json()), path + ": pre_tokenizer");
  model_ = hf::make_model(j["model"], path + ": model");
  auto added = read_added_tokens(j.value("added_tokens", nlohmann::json()), path + ": added_tokens");
  // The library numbers added tokens itself, in file order: a token the model's vocabulary has keeps the model's id,
  // any other takes the next id after the vocabulary and the added tokens so far. A whole file's own ids agree.
  const int64_t model_size = static_cast<int64_t>(model_->vocab().size());
  std::optional<int64_t> max_added;
  for (auto& a : added) {
    if (const auto it = model_->vocab().find(a.content); it != model_->vocab().end()) a.id = it->second;
    else if (const auto seen = added_.find(a.content); seen != added_.end()) a.id = seen->second;
    else
      a.id = static_cast<int32_t>(!max_added || (*max_added < model_size && model_size != 0) ? model_size
                                                                                             : *max_added + 1);
    added_[a.content] = a.id;
    max_added = std::max(max_added.value_or(a.id), static_cast<int64_t>(a.id));
  }
  std::vector<AddedToken> raw, normalized;
  for (const auto& a : added) {
    if (!a.normalized) {
      raw.push_back(a);
      continue;
    }
    // Found in the normalized text as the normalizer writes it ("<X>" under Lowercase matches "<x>").
    AddedToken in_normalized = a;
    if (normalizer_) in_normalized.content = normalizer_(a.content);
    if (!in_normalized.content.empty()) normalized.push_back(std::move(in_normalized));
  }
  raw_added_ = std::make_unique<AddedTokenMatcher>(raw);
  normalized_added_ = std::make_unique<AddedTokenMatcher>(normalized);
  auto literal = std::make_shared<std::unordered_set<std::string>>();
  for (const auto& a : added) literal->insert(a.content);
  decoder_ = hf::make_decoder(j.value("decoder", nlohmann::json()), path + ": decoder", literal);

  int32_t max_id = -1;
  for (const auto& [token, id] : model_->vocab()) max_id = std::max(max_id, id);
  for (const auto& [token, id] : added_) max_id = std::max(max_id, id);
  // Ids are rows of the embedding: a few gaps are fine, an id far past the entries is a damaged file.
  const size_t entries = model_->vocab().size() + added_.size();
  if (static_cast<size_t>(max_id) >= 2 * entries + 65536)
    throw std::invalid_argument(path + ": token id " + std::to_string(max_id) + " is far past the " +
                                std::to_string(entries) +
                                " tokens of the vocabulary and added_tokens (ids number the embedding's rows)");
  id_to_token_.resize(static_cast<size_t>(max_id) + 1);
  for (const auto& [token, id] : model_->vocab()) id_to_token_[id] = token;
  for (const auto& [token, id] : added_) id_to_token_[id] = token;
}

PipelineTokenizer::~PipelineTokenizer() = default;

std::optional<int32_t> PipelineTokenizer::token_to_id(const std::string& token) const {
  if (const auto it = added_.find(token); it != added_.end()) return it->second;
  const auto& vocab = model_->vocab();
  if (const auto it = vocab.find(token); it != vocab.end()) return it->second;
  return std::nullopt;
}

std::vector<int32_t> PipelineTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  std::vector<AddedTokenMatcher::Section> sections;
  raw_added_->split(std::string(text), true, sections);
  for (const auto& section : sections) {
    if (section.id) {
      ids.push_back(*section.id);
      continue;
    }
    std::vector<AddedTokenMatcher::Section> inner;
    normalized_added_->split(normalizer_ ? normalizer_(section.text) : section.text, section.at_start, inner);
    for (const auto& s : inner) {
      if (s.id) ids.push_back(*s.id);
      else encode_section(s.text, s.at_start, ids);
    }
  }
  return ids;
}

void PipelineTokenizer::encode_section(const std::string& text, bool at_start, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::vector<hf::Piece> pieces{{text, at_start}};
  if (pre_tokenizer_) {
    try {
      pre_tokenizer_(pieces);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(path_ + ": pre_tokenizer: " + e.what());
    }
  }
  try {
    for (const auto& piece : pieces) model_->encode(piece.text, out);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path_ + ": model: " + e.what());
  }
}

std::string PipelineTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || id_to_token_[id].empty())
      throw std::out_of_range(path_ + ": token id " + std::to_string(id) + " is not in the vocabulary");
    tokens.push_back(id_to_token_[id]);
  }
  std::string out;
  if (!decoder_) {
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  try {
    decoder_(tokens);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path_ + ": decoder: " + e.what());
  }
  for (const auto& t : tokens) out += t;
  return out;
}

std::unique_ptr<PipelineTokenizer> gpt2_tokenizer(const std::string& encoder_json, const std::string& merges_file) {
  nlohmann::json merges = nlohmann::json::array();
  std::istringstream lines(read_text_file(merges_file, "merges file (vocab.bpe)"));
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (n == 1 && line.rfind("#version", 0) == 0)) continue;
    const auto [left, right] = read_merge(line, merges_file + ":" + std::to_string(n));
    merges.push_back({left, right});
  }
  nlohmann::json j = {
      {"model",
       {{"type", "BPE"}, {"vocab", parse_json_file(encoder_json, "encoder file (encoder.json)")}, {"merges", merges}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}}};
  return std::make_unique<PipelineTokenizer>(j, encoder_json + " + " + merges_file);
}

}  // namespace zoo::text
