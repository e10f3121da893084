// Implementation of data/text/labeled_tokens.h.
#include "data/text/labeled_tokens.h"

#include <algorithm>
#include <stdexcept>

namespace zoo::text {
namespace {

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.size() >= prefix.size() && text.compare(0, prefix.size(), prefix) == 0;
}

// How many leading ids of `whole` the text whole_text[:chars] accounts for.
size_t tokens_before(const Tokenizer& tokenizer, const std::string& whole_text, size_t chars,
                     const std::vector<int32_t>& whole) {
  if (chars >= whole_text.size()) return whole.size();
  const auto prefix = tokenizer.encode(std::string_view(whole_text).substr(0, chars));
  const auto end = std::mismatch(prefix.begin(), prefix.end(), whole.begin(), whole.end());
  return static_cast<size_t>(end.second - whole.begin());
}

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
                          const std::vector<ChatMessage>& messages) {
  bool any_assistant = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant")
      throw std::invalid_argument("message " + std::to_string(i) + ": unknown role '" + role +
                                  "' (expected system, user or assistant)");
    any_assistant = any_assistant || role == "assistant";
  }
  if (!any_assistant) throw std::invalid_argument("no assistant message: there is nothing to learn from this conversation");
  const std::string whole = chat_template.render(messages, false);
  LabeledTokens out;
  out.ids = tokenizer.encode(whole);
  out.in_loss.assign(out.ids.size(), 0);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].role != "assistant") continue;
    const std::vector<ChatMessage> before(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(i));
    const std::vector<ChatMessage> through(messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(i + 1));
    const std::string prompt = chat_template.render(before, true), turn = chat_template.render(through, false);
    if (!starts_with(turn, prompt) || !starts_with(whole, turn))
      throw std::invalid_argument(chat_template.origin() + ": the chat template does not render message " +
                                  std::to_string(i) + " (assistant) as text appended to the conversation before it, "
                                  "so zoo cannot tell which tokens are the assistant's");
    const size_t from = tokens_before(tokenizer, whole, prompt.size(), out.ids);
    const size_t to = tokens_before(tokenizer, whole, turn.size(), out.ids);
    std::fill(out.in_loss.begin() + static_cast<std::ptrdiff_t>(from), out.in_loss.begin() + static_cast<std::ptrdiff_t>(std::max(from, to)), 1);
  }
  return out;
}

}  // namespace zoo::text
