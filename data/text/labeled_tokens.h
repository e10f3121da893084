// Token ids with the part a fine-tune learns from marked: a prompt and its
// completion, or a conversation rendered by its chat template with the
// assistant turns marked. Defines: LabeledTokens, prompt_completion_tokens,
// chat_tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/text/chat_template.h"
#include "data/text/tokenizer.h"

namespace zoo::text {

struct LabeledTokens {
  std::vector<int32_t> ids;
  std::vector<uint8_t> in_loss;  // per id: 1 where a model is trained to predict it
  int64_t turns_cut = 0;  // assistant turns the template renders otherwise inside the conversation (see chat_tokens)
};

// [bos where the tokenizer adds one] prompt [sep] completion eos; the
// completion and eos are in the loss. Throws std::invalid_argument for an
// empty completion.
LabeledTokens prompt_completion_tokens(const Tokenizer& tokenizer, const std::string& prompt,
                                       const std::string& completion, std::optional<int32_t> sep, int32_t eos);

// The conversation rendered as one text and tokenized once (with no
// special tokens added: the template writes them, as apply_chat_template
// does). Assistant turn i is the text the template adds between rendering
// messages[:i] with the generation prompt and messages[:i + 1]; the tokens
// of that text are in the loss (a token that straddles the turn's start
// counts as the assistant's, one that straddles its end does not). Turns
// are marked up to `max_tokens` ids (a sample's length: a turn past it is
// cut anyway), so a long conversation costs one rendering and a few short
// ones. A template that appends the assistant header even without the
// generation prompt has that trailing header left out of the text. A turn
// the template renders otherwise when it ends the conversation than inside
// it (Qwen3's empty <think> block on the last turn) is learned only as far as
// both renderings agree, as a reference computed from those renderings
// marks it; such turns are counted in turns_cut. When the conversation
// before a turn renders otherwise once the reply follows (Mistral Nemo
// writes the system message only before a final user turn), the turn starts
// where the template puts a marker given as the reply's content. Roles:
// system, user, assistant; there must be an assistant turn. Throws
// std::invalid_argument naming the message at fault, or the template when
// neither way finds the turn's start inside the whole.
LabeledTokens chat_tokens(const Tokenizer& tokenizer, const ChatTemplate& chat_template,
                          const std::vector<ChatMessage>& messages, size_t max_tokens = SIZE_MAX);

}  // namespace zoo::text
