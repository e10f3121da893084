// A tokenizer as Hugging Face saves one: a directory with tokenizer.json
// (byte-level BPE, or SentencePiece-style BPE with byte fallback) or a
// SentencePiece tokenizer.model / spiece.model, beside tokenizer_config.json
// (add_bos_token, add_eos_token, the special tokens' texts, added tokens,
// chat_template). Defines: load_huggingface_tokenizer, tokenizer_files.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/text/tokenizer.h"

namespace zoo::text {

// `path`: the directory, or one of its tokenizer files. Throws
// std::invalid_argument naming the file and key it cannot use.
std::unique_ptr<Tokenizer> load_huggingface_tokenizer(const std::string& path);

// The tokenizer files present in `dir`, for copying a tokenizer beside a converted checkpoint.
std::vector<std::string> tokenizer_files(const std::string& dir);

}  // namespace zoo::text
