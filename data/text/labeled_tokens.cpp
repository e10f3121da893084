// Implementation of data/text/labeled_tokens.h.
#include "data/text/labeled_tokens.h"

#include <algorithm>
#include <stdexcept>

namespace zoo::text {
namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// How many leading ids of `whole` the text whole_text[:chars] accounts for.
size_t tokens_before(const Tokenizer& tokenizer, const std::string& whole_text, size_t chars,
                     const std::vector<int32_t>& whole) {
  if (chars >= whole_text.size()) return whole.size();
  const auto prefix = tokenizer.encode(std::string_view(whole_text).substr(0, chars));
  const auto end = std::mismatch(prefix.begin(), prefix.end(), whole.begin(), whole.end());
  return static_cast<size_t>(end.second - whole.begin());
}

// Stands for a reply's content to find where the template starts it: no text has it.
constexpr const char* kReplyMarker = "\x01zoo-reply\x02";

}  // namespace

LabeledTokens prompt_completion_tokens(const Tokenizer& tokenizer, const std::string& prompt,
                                       const std::string& completion, std::optional<int32_t> sep, int32_t eos) {
  if (completion.find_first_not_of(" \t\r\n") == std::string::npos)
    throw std::invalid_argument("the completion is empty: there is nothing to learn from this pair");
  LabeledTokens out;
  const auto& special = tokenizer.special_tokens();
  if (special.add_bos && special.bos) out.ids.push_back(*special.bos);
  const auto p = tokenizer.encode(prompt);
  out.ids.insert(out.ids.end(), p.begin(), p.end());
  if (sep) out.ids.push_back(*sep);
  out.in_loss.assign(out.ids.size(), 0);
  const auto c = tokenizer.encode(completion);
  out.ids.insert(out.ids.end(), c.begin(), c.end());
  out.ids.push_back(eos);
  out.in_loss.resize(out.ids.size(), 1);
  return out;
}

LabeledTokens chat_tokens(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                          const std::vector<ChatMessage>& messages, size_t max_tokens) {
  bool any_assistant = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant")
      throw std::invalid_argument("message " + std::to_string(i) + ": unknown role '" + role +
                                  "' (expected system, user or assistant)");
    any_assistant = any_assistant || role == "assistant";
  }
  if (!any_assistant)
    throw std::invalid_argument("no assistant message: there is nothing to learn from this conversation");
  // Rendering without the generation prompt, less what such a template appends anyway.
  const std::string& always = chat_template.unconditional_generation_prompt();
  auto rendered = [&](const std::vector<ChatMessage>& m) {
    std::string text = chat_template.render(m, false);
    if (ends_with(text, always)) text.resize(text.size() - always.size());
    return text;
  };
  const std::string whole = rendered(messages);
  LabeledTokens out;
  out.ids = tokenizer.encode(whole);
  out.in_loss.assign(out.ids.size(), 0);
  std::vector<ChatMessage> before;
  before.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); before.push_back(messages[i++])) {
    if (messages[i].role != "assistant") continue;
    std::vector<ChatMessage> through = before;
    through.push_back(messages[i]);
    const std::string turn = rendered(through);
    std::string prompt = chat_template.render(before, true);
    if (!starts_with(turn, prompt) || !starts_with(whole, prompt)) {
      // The conversation before this turn renders otherwise once the reply follows (Mistral Nemo's template writes
      // the system message only before a final user turn): the reply starts where the template puts a marker given
      // as its content, if the rendering up to there is the turn's and the whole's.
      through.back().content = kReplyMarker;
      const std::string marked = chat_template.render(through, false);
      const size_t at = marked.find(kReplyMarker);
      prompt = marked.substr(0, std::min(at, marked.size()));
      if (at == std::string::npos || !starts_with(turn, prompt) || !starts_with(whole, prompt))
        throw std::invalid_argument(chat_template.origin() + ": the chat template does not render message " +
                                    std::to_string(i) +
                                    " (assistant) after the conversation before it and its "
                                    "generation prompt, so zoo cannot tell which tokens are the assistant's; give a "
                                    "template that does (--chat_template)");
    }
    const size_t from = tokens_before(tokenizer, whole, prompt.size(), out.ids);
    if (from >= max_tokens) break;  // this turn and every later one start past the sample
    size_t to = 0;
    if (starts_with(whole, turn)) {
      to = tokens_before(tokenizer, whole, turn.size(), out.ids);
    } else {  // rendered otherwise as the last message: learned as far as the renderings agree
      const auto own = tokenizer.encode(turn);
      to = static_cast<size_t>(std::mismatch(own.begin(), own.end(), out.ids.begin(), out.ids.end()).first -
                               own.begin());
      ++out.turns_cut;
    }
    std::fill(out.in_loss.begin() + static_cast<std::ptrdiff_t>(from),
              out.in_loss.begin() + static_cast<std::ptrdiff_t>(std::max(from, to)), 1);
  }
  return out;
}

}  // namespace zoo::text
