// make_tokenizer (data/text/tokenizer.h) and the byte tokenizer.
#include "data/text/tokenizer.h"

#include <algorithm>
#include <stdexcept>

#include "data/text/hf_pipeline.h"
#include "data/text/hf_tokenizer.h"
#include "data/text/tokenizer_json.h"

namespace zoo::text {
namespace {

// Token id = byte value: zoo's ByteTextDataProcessor vocabulary.
class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out;
    for (int32_t id : ids) {
      if (id < 0 || id > 255) throw std::out_of_range("token id " + std::to_string(id) + " is not a byte");
      out += static_cast<char>(id);
    }
    return out;
  }
  int64_t vocab_size() const override { return 256; }
  std::optional<int32_t> token_to_id(const std::string&) const override { return std::nullopt; }
};

}  // namespace

std::vector<int32_t> Tokenizer::encode_with_special_tokens(std::string_view text) const {
  std::vector<int32_t> ids;
  if (special_.add_bos) ids.push_back(*special_.bos);
  const std::vector<int32_t> body = encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  if (special_.add_eos) ids.push_back(*special_.eos);
  return ids;
}

std::string Tokenizer::decode_like_transformers(const std::vector<int32_t>& ids) const {
  std::string text = decode(ids);
  return special_.clean_up_spaces ? clean_up_tokenization_spaces(std::move(text)) : text;
}

size_t settled_prefix(const std::string& decoded) {
  const size_t newline = decoded.rfind('\n'), space = decoded.rfind(' ');
  const size_t through_newline = newline == std::string::npos ? 0 : newline + 1;
  const size_t before_space = space == std::string::npos ? 0 : space;
  return std::max(through_newline, before_space);
}

std::string decode_generated(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  const std::string replacement = "\xEF\xBF\xBD";  // U+FFFD
  std::string text;
  std::vector<int32_t> known;
  for (int32_t id : ids) {
    if (id < tokenizer.vocab_size()) {
      known.push_back(id);
      continue;
    }
    text += tokenizer.decode_like_transformers(known) + replacement;
    known.clear();
  }
  return text + tokenizer.decode_like_transformers(known);
}

std::string clean_up_tokenization_spaces(std::string text) {
  static const std::pair<const char*, const char*> kCleanUps[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kCleanUps) text = replace_all(text, from, to);
  return text;
}

std::string replace_all(const std::string& text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  std::string out;
  out.reserve(text.size());
  size_t at = 0;
  for (size_t hit; (hit = text.find(from, at)) != std::string::npos; at = hit + from.size())
    out.append(text, at, hit - at).append(to);
  return out.append(text, at, std::string::npos);
}

const std::vector<std::string>& tokenizer_types() {
  static const std::vector<std::string> types = {"GPT2Tokenizer", "NeoXTokenizer", "HuggingFaceTokenizer",
                                                 "ByteTokenizer"};
  return types;
}

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerSpec& spec) {
  if (spec.type == "ByteTokenizer") return std::make_unique<ByteTokenizer>();
  if (spec.type == "GPT2Tokenizer") {
    if (spec.vocab_file.empty() || spec.encoder_file.empty())
      throw std::invalid_argument(
          "tokenizer_type GPT2Tokenizer needs --vocab_file (vocab.bpe, the merges) and --encoder_file (encoder.json)");
    return gpt2_tokenizer(spec.encoder_file, spec.vocab_file);
  }
  if (spec.type == "HuggingFaceTokenizer") {
    const std::string& path = !spec.huggingface_tokenizer.empty() ? spec.huggingface_tokenizer : spec.encoder_file;
    if (path.empty())
      throw std::invalid_argument(
          "tokenizer_type HuggingFaceTokenizer needs --huggingface_tokenizer: a local tokenizer "
          "directory (tokenizer.json or tokenizer.model, with tokenizer_config.json)");
    return load_huggingface_tokenizer(path);
  }
  if (spec.type == "NeoXTokenizer") {
    const std::string& file = !spec.encoder_file.empty() ? spec.encoder_file : spec.huggingface_tokenizer;
    if (file.empty())
      throw std::invalid_argument("tokenizer_type NeoXTokenizer needs --encoder_file: a local tokenizer.json");
    return std::make_unique<PipelineTokenizer>(parse_json_file(file, "tokenizer file (tokenizer.json)"), file);
  }
  std::string known;
  for (const auto& t : tokenizer_types()) known += (known.empty() ? "" : ", ") + t;
  throw std::invalid_argument("unknown tokenizer_type '" + spec.type + "' (expected one of: " + known + ")");
}

}  // namespace zoo::text
