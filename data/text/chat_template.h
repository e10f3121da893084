// A model's chat template (Jinja, from tokenizer_config.json or
// chat_template.jinja) rendered as transformers' apply_chat_template(...,
// tokenize=False) renders it. Defines: ChatMessage, ChatTemplate.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/text/tokenizer.h"

namespace minja {
struct RenderLimits;
}

namespace zoo::text {

struct ChatMessage {
  std::string role;        // "system", "user", "assistant", ...
  nlohmann::json content;  // text, or a list of parts ([{"type": "text", "text": ...}]) passed to the template as is
};

// Rendered by minja (third_party/minja), a Jinja implementation made for
// chat templates, with trim_blocks and lstrip_blocks as transformers sets
// them. The template sees messages, add_generation_prompt, bos_token,
// eos_token, pad_token, unk_token, raise_exception and strftime_now. A
// render is bounded (nesting, steps, output size, time), as the templates
// come with downloaded files.
class ChatTemplate {
 public:
  // Parses once. `origin` names where the template came from, for errors.
  // Throws std::invalid_argument for an empty or oversized template or one minja cannot parse, naming what it met.
  ChatTemplate(const std::string& source, const SpecialTokens& tokens, std::string origin);
  // Throws std::invalid_argument with the template's own message (raise_exception),
  // the feature it could not render, or the bound it reached.
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  const std::string& origin() const { return origin_; }
  // The text a template writes after the last message even when add_generation_prompt is false (Meta-Llama-3-8B-
  // Instruct's first template appends the assistant header unconditionally); empty for templates that obey the flag.
  const std::string& unconditional_generation_prompt() const { return unconditional_prompt_; }

  static constexpr size_t kMaxSourceBytes = 1 << 20;
  static constexpr size_t kMaxOutputBytes = 64 << 20;

 private:
  std::string render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                     const minja::RenderLimits& limits) const;
  struct Parsed;
  std::shared_ptr<const Parsed> parsed_;
  SpecialTokens tokens_;
  std::string origin_;
  std::string unconditional_prompt_;
};

}  // namespace zoo::text
