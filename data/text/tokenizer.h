// Text -> token ids for preprocessing (zoo data create-hdf5) and generation.
// Defines: Tokenizer, TokenizerSpec, make_tokenizer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zoo::text {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Throws std::out_of_range for an id outside the vocabulary.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  // The id of a whole vocabulary entry (e.g. "<|endoftext|>"), if there is one.
  virtual std::optional<int32_t> token_to_id(const std::string& token) const = 0;
};

// modelzoo's create_hdf5_dataset.py names: tokenizer_type GPT2Tokenizer takes
// vocab_file = vocab.bpe (merges) and encoder_file = encoder.json;
// NeoXTokenizer and HuggingFaceTokenizer take a tokenizer.json (encoder_file,
// or huggingface_tokenizer as a local path); ByteTokenizer (zoo's) maps each
// byte to its value.
struct TokenizerSpec {
  std::string type;
  std::string vocab_file;
  std::string encoder_file;
  std::string huggingface_tokenizer;
};

// Throws std::invalid_argument naming the option or file and what was expected.
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerSpec& spec);
const std::vector<std::string>& tokenizer_types();

}  // namespace zoo::text
