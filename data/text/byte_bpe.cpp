// Implementation of data/text/byte_bpe.h.
#include "data/text/byte_bpe.h"

#include "data/text/tokenizer_json.h"
#include "data/text/utf8.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <climits>
#include <sstream>
#include <stdexcept>

namespace zoo::text {
namespace {

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
// other 68 bytes get code points 256, 257, ... in byte order.
struct ByteAlphabet {
  std::array<std::string, 256> byte_to_text;
  std::unordered_map<uint32_t, uint8_t> code_point_to_byte;
  ByteAlphabet() {
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? b : next++;
      append_utf8(byte_to_text[b], cp);
      code_point_to_byte[cp] = static_cast<uint8_t>(b);
    }
  }
};
const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

}  // namespace

ByteLevelBpe::ByteLevelBpe(Spec spec)
    : vocab_(std::move(spec.vocab)),
      splitter_(std::make_unique<RegexSplitter>(spec.pattern)),
      add_prefix_space_(spec.add_prefix_space),
      added_tokens_(std::move(spec.added_tokens)) {
  for (const auto& [token, id] : added_tokens_) vocab_.emplace(token, id);
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab_) max_id = std::max(max_id, id);
  id_to_token_.resize(static_cast<size_t>(max_id + 1));
  for (const auto& [token, id] : vocab_) id_to_token_[id] = token;
  for (const auto& [left, right] : spec.merges) merges_.add(left, right);
  for (const auto& [token, id] : added_tokens_) {
    if (token.empty()) throw std::invalid_argument("added token " + std::to_string(id) + " has no text");
    literal_ids_.insert(id);
    starts_added_[static_cast<unsigned char>(token[0])] = true;
  }
  // Longest first, so an added token that starts another one does not hide it.
  std::stable_sort(added_tokens_.begin(), added_tokens_.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (const auto& text : alphabet().byte_to_text)
    if (!vocab_.count(text))
      throw std::invalid_argument("byte-level BPE vocabulary lacks the byte token '" + text +
                                  "': not a byte-level vocabulary, some texts could not be encoded");
}

std::unique_ptr<ByteLevelBpe> ByteLevelBpe::from_gpt2_files(const std::string& encoder_json,
                                                            const std::string& merges_file) {
  Spec spec;
  spec.vocab = read_vocab(parse_json_file(encoder_json, "encoder file (encoder.json)"), encoder_json);
  std::istringstream lines(read_text_file(merges_file, "merges file (vocab.bpe)"));
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (n == 1 && line.rfind("#version", 0) == 0)) continue;
    spec.merges.push_back(read_merge(line, merges_file + ":" + std::to_string(n)));
  }
  return std::make_unique<ByteLevelBpe>(std::move(spec));
}

std::unique_ptr<ByteLevelBpe> ByteLevelBpe::from_tokenizer_json(const nlohmann::json& j, const std::string& path) {
  auto fail = [&](const std::string& key, const std::string& what) -> void {
    throw std::invalid_argument(path + ": " + key + ": " + what);
  };
  const auto& model = j.value("model", nlohmann::json());
  if (model.value("type", std::string()) != "BPE")
    fail("model.type", "expected \"BPE\" (zoo reads byte-level BPE tokenizers), got " + model.value("type", nlohmann::json()).dump());
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && !model[key].is_null() && model[key] != "")
      fail(std::string("model.") + key, "not supported (only byte-level BPE)");
  if (model.value("byte_fallback", false)) fail("model.byte_fallback", "a byte-level BPE has no byte fallback");
  if (j.contains("normalizer") && !j["normalizer"].is_null())
    fail("normalizer", "not supported: zoo applies no normalizer, expected null");
  Spec spec;
  spec.vocab = read_vocab(model.value("vocab", nlohmann::json()), path + ": model.vocab");
  spec.merges = read_merges(model.value("merges", nlohmann::json::array()), path + ": model.merges");
  // Pre-tokenizer: ByteLevel (GPT-2's regex unless use_regex is false), alone
  // or after a Split with its own regex (e.g. Llama 3).
  const auto& pre = j.value("pre_tokenizer", nlohmann::json());
  std::vector<nlohmann::json> steps;
  if (pre.value("type", std::string()) == "Sequence") steps = pre.value("pretokenizers", std::vector<nlohmann::json>());
  else steps.push_back(pre);
  bool byte_level = false, have_pattern = false;
  for (const auto& step : steps) {
    const std::string type = step.value("type", std::string());
    if (type == "ByteLevel") {
      byte_level = true;
      spec.add_prefix_space = step.value("add_prefix_space", false);
      if (step.value("use_regex", true)) {
        if (have_pattern) fail("pre_tokenizer", "a Split and a ByteLevel with use_regex both split the text");
        have_pattern = true;
      }
    } else if (type == "Split" && !byte_level && !have_pattern) {
      const auto& pattern = step.value("pattern", nlohmann::json());
      if (!pattern.contains("Regex") || step.value("behavior", std::string()) != "Isolated" || step.value("invert", false))
        fail("pre_tokenizer", "a Split is supported with a Regex pattern, behavior Isolated and invert false");
      spec.pattern = pattern["Regex"].get<std::string>();
      have_pattern = true;
    } else {
      fail("pre_tokenizer", "expected ByteLevel, or Split then ByteLevel; got " + step.dump().substr(0, 200));
    }
  }
  if (!byte_level) fail("pre_tokenizer", "expected a ByteLevel pre-tokenizer (zoo reads byte-level BPE tokenizers)");
  for (const auto& t : read_added_tokens(j.value("added_tokens", nlohmann::json()), path + ": added_tokens"))
    spec.added_tokens.emplace_back(t.content, t.id);
  try {
    return std::make_unique<ByteLevelBpe>(std::move(spec));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(path + ": " + e.what());
  }
}

std::optional<int32_t> ByteLevelBpe::token_to_id(const std::string& token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::vector<int32_t> ByteLevelBpe::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  size_t plain_start = 0, pos = 0;
  while (!added_tokens_.empty() && pos < text.size()) {
    const std::pair<std::string, int32_t>* hit = nullptr;
    if (starts_added_[static_cast<unsigned char>(text[pos])])
      for (const auto& added : added_tokens_)
        if (text.compare(pos, added.first.size(), added.first) == 0) {
          hit = &added;
          break;
        }
    if (!hit) {
      ++pos;
      continue;
    }
    encode_plain(text.substr(plain_start, pos - plain_start), ids);
    ids.push_back(hit->second);
    pos += hit->first.size();
    plain_start = pos;
  }
  encode_plain(text.substr(plain_start), ids);
  return ids;
}

void ByteLevelBpe::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::string prefixed;
  if (add_prefix_space_ && text.front() != ' ') {
    prefixed = " " + std::string(text);
    text = prefixed;
  }
  splitter_->split(text, [&](std::string_view piece) {
    const std::vector<int32_t> ids = encode_piece(piece);
    out.insert(out.end(), ids.begin(), ids.end());
  });
}

std::vector<int32_t> ByteLevelBpe::encode_piece(std::string_view piece) const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  const std::string key(piece);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  if (cache_.size() > (1u << 20)) cache_.clear();  // bounded memory on huge, varied corpora

  std::vector<std::string> word;
  for (unsigned char b : piece) word.push_back(alphabet().byte_to_text[b]);
  merges_.apply(word);
  std::vector<int32_t> ids;
  for (const auto& token : word) {
    const auto it = vocab_.find(token);
    if (it == vocab_.end())
      throw std::runtime_error("byte-level BPE: merged token '" + token + "' is not in the vocabulary");
    ids.push_back(it->second);
  }
  return cache_.emplace(key, std::move(ids)).first->second;
}

std::string ByteLevelBpe::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || (id_to_token_[id].empty() && !literal_ids_.count(id)))
      throw std::out_of_range("token id " + std::to_string(id) + " is not in the vocabulary");
    const std::string& token = id_to_token_[id];
    if (literal_ids_.count(id)) {
      out += token;
      continue;
    }
    for (size_t i = 0; i < token.size();) {
      // Decode one UTF-8 code point of the byte-level text (all below U+0800).
      const auto c = static_cast<unsigned char>(token[i]);
      uint32_t cp = c;
      size_t len = 1;
      if (c >= 0xE0 && i + 2 < token.size()) {
        cp = ((c & 0x0F) << 12) | ((token[i + 1] & 0x3F) << 6) | (token[i + 2] & 0x3F);
        len = 3;
      } else if (c >= 0xC0 && i + 1 < token.size()) {
        cp = ((c & 0x1F) << 6) | (token[i + 1] & 0x3F);
        len = 2;
      }
      const auto& map = alphabet().code_point_to_byte;
      const auto it = map.find(cp);
      if (it == map.end())
        throw std::out_of_range("token id " + std::to_string(id) + " ('" + token + "') is not byte-level text");
      out += static_cast<char>(it->second);
      i += len;
    }
  }
  return out;
}

}  // namespace zoo::text
