// make_tokenizer (data/text/tokenizer.h) and the byte tokenizer.
#include "data/text/tokenizer.h"

#include <stdexcept>

#include "data/text/byte_bpe.h"

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
    return ByteLevelBpe::from_gpt2_files(spec.encoder_file, spec.vocab_file);
  }
  if (spec.type == "NeoXTokenizer" || spec.type == "HuggingFaceTokenizer") {
    const std::string& file = !spec.encoder_file.empty() ? spec.encoder_file : spec.huggingface_tokenizer;
    if (file.empty())
      throw std::invalid_argument("tokenizer_type " + spec.type +
                                  " needs --encoder_file (or --huggingface_tokenizer): a local tokenizer.json");
    return ByteLevelBpe::from_tokenizer_json(file);
  }
  std::string known;
  for (const auto& t : tokenizer_types()) known += (known.empty() ? "" : ", ") + t;
  throw std::invalid_argument("unknown tokenizer_type '" + spec.type + "' (expected one of: " + known + ")");
}

}  // namespace zoo::text
