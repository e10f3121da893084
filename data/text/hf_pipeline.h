// A Hugging Face tokenizer.json applied stage by stage as the tokenizers
// library does: added tokens are found first (those marked normalized in the
// normalized text), each stretch between them is normalized, pre-tokenized
// and encoded by the model; decoding runs the file's decoder.
// Defines: PipelineTokenizer, gpt2_tokenizer.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <unordered_set>
#include <vector>

#include "data/text/hf_components.h"
#include "data/text/tokenizer.h"
#include "data/text/tokenizer_json.h"

namespace zoo::text {

class PipelineTokenizer : public Tokenizer {
 public:
  // Throws std::invalid_argument naming `path`, the key and what was expected.
  PipelineTokenizer(const nlohmann::json& tokenizer_json, const std::string& path);
  ~PipelineTokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_token_.size()); }
  std::optional<int32_t> token_to_id(const std::string& token) const override;

 private:
  class AddedTokenMatcher;
  void build(const nlohmann::json& tokenizer_json);
  void encode_section(const std::string& text, bool at_start, std::vector<int32_t>& out) const;

  std::string path_;
  hf::Normalizer normalizer_;
  hf::PreTokenizer pre_tokenizer_;
  std::unique_ptr<hf::Model> model_;
  hf::Decoder decoder_;
  std::unique_ptr<AddedTokenMatcher> raw_added_, normalized_added_;
  std::unordered_map<std::string, int32_t> added_;
  std::vector<std::string> id_to_token_;
};

// GPT-2's own files (encoder.json: token -> id; vocab.bpe: one merge "a b" a
// line) as the byte-level BPE pipeline they describe.
std::unique_ptr<PipelineTokenizer> gpt2_tokenizer(const std::string& encoder_json, const std::string& merges_file);

}  // namespace zoo::text
