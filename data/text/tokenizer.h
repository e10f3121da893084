// Text -> token ids for preprocessing (zoo data create-hdf5) and generation.
// Defines: Tokenizer, TokenizerSpec, make_tokenizer, clean_up_tokenization_spaces,
// replace_all.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zoo::text {

// What a tokenizer directory says beyond the vocabulary
// (tokenizer_config.json, tokenizer.json's post_processor).
struct SpecialTokens {
  std::optional<int32_t> bos, eos, pad;
  std::string bos_token, eos_token, pad_token, unk_token;  // their texts, for chat templates
  bool add_bos = false, add_eos = false;                   // what encode_with_special_tokens adds
  bool clean_up_spaces = false;                            // clean_up_tokenization_spaces: " ." -> "." and the like
  std::string chat_template;                               // "" when the directory has none
  std::string source;                                      // the directory or file they came from, for errors
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Throws std::out_of_range for an id outside the vocabulary.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  // The id of a whole vocabulary entry (e.g. "<|endoftext|>"), if there is one.
  virtual std::optional<int32_t> token_to_id(const std::string& token) const = 0;

  const SpecialTokens& special_tokens() const { return special_; }
  void set_special_tokens(SpecialTokens s) { special_ = std::move(s); }
  // encode(), with bos in front and eos behind where the tokenizer adds them
  // (Hugging Face's encode(text) with add_special_tokens).
  std::vector<int32_t> encode_with_special_tokens(std::string_view text) const;
  // decode(), then transformers' clean-up of spaces before punctuation and
  // contractions where the tokenizer asks for it: the text a user is shown.
  std::string decode_like_transformers(const std::vector<int32_t>& ids) const;

 private:
  SpecialTokens special_;
};

// How much of `decoded` (the decode of all tokens generated so far) is
// settled enough to show while more tokens come: through the last newline, or
// up to the last space. The decode of later tokens can rewrite what follows:
// a character split across byte tokens, SentencePiece's word pieces, the
// clean-up of a space before punctuation. As transformers' TextStreamer, which
// shows the rest once generation ends.
size_t settled_prefix(const std::string& decoded);

// The text of generated token ids as transformers' decode gives it; an id past
// the tokenizer's vocabulary (a model's may be padded) is U+FFFD.
std::string decode_generated(const Tokenizer& tokenizer, const std::vector<int32_t>& ids);

// Every `from` in `text` replaced by `to`, left to right in one pass (nothing for an empty `from`).
std::string replace_all(const std::string& text, const std::string& from, const std::string& to);

// transformers' clean_up_tokenization: no space before punctuation and contractions (" ." -> ".", " n't" -> "n't").
std::string clean_up_tokenization_spaces(std::string text);

// modelzoo's create_hdf5_dataset.py names: tokenizer_type GPT2Tokenizer takes
// vocab_file = vocab.bpe (merges) and encoder_file = encoder.json;
// NeoXTokenizer takes a tokenizer.json (encoder_file); HuggingFaceTokenizer
// takes huggingface_tokenizer, a directory as Hugging Face saves one
// (tokenizer.json or tokenizer.model, with tokenizer_config.json) or one such
// file; ByteTokenizer (zoo's) maps each byte to its value.
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
