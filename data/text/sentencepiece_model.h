// A SentencePiece model file (tokenizer.model, T5's spiece.model) through the
// SentencePiece library itself (reached through libzoo_sentencepiece.so, see
// data/text/sentencepiece_shim.h for why). Added tokens (the model's control
// pieces such as <s>, and tokenizer_config.json's) are matched in the text
// first and each stretch between them is encoded on its own, as
// transformers' slow tokenizers do. Defines: SentencePieceModel.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/text/tokenizer.h"
#include "data/text/tokenizer_json.h"

namespace zoo::text {

class SentencePieceModel : public Tokenizer {
 public:
  // Throws std::invalid_argument naming `path` when the library cannot load
  // it, std::runtime_error when libzoo_sentencepiece.so cannot be opened.
  SentencePieceModel(const std::string& path, std::vector<AddedToken> added_tokens);
  ~SentencePieceModel() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<int32_t> token_to_id(const std::string& token) const override;

 private:
  void* model_ = nullptr;
  int piece_size_ = 0;
  std::vector<AddedToken> added_tokens_;  // longest first
  int64_t vocab_size_ = 0;
};

}  // namespace zoo::text
