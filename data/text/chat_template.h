// A model's chat template (Jinja, from tokenizer_config.json or
// chat_template.jinja) rendered as transformers' apply_chat_template(...,
// tokenize=False) renders it. Defines: ChatMessage, ChatTemplate.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/text/tokenizer.h"

namespace zoo::text {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", ...
  std::string content;
};

// Rendered by minja (third_party/minja), a Jinja implementation made for
// chat templates, with trim_blocks and lstrip_blocks as transformers sets
// them. The template sees messages, add_generation_prompt, bos_token,
// eos_token, pad_token, unk_token and raise_exception.
class ChatTemplate {
 public:
  // Parses once. `origin` names where the template came from, for errors.
  // Throws std::invalid_argument for an empty template or one minja cannot parse, naming what it met.
  ChatTemplate(const std::string& source, const SpecialTokens& tokens, std::string origin);
  // Throws std::invalid_argument with the template's own message (raise_exception)
  // or the feature it could not render.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  const std::string& origin() const { return origin_; }

 private:
  struct Parsed;
  std::shared_ptr<const Parsed> parsed_;
  SpecialTokens tokens_;
  std::string origin_;
};

}  // namespace zoo::text
