// The Summarization and Chat modes of `zoo data create-hdf5`
// (data/create_hdf5.h): one prompt/completion pair or conversation per
// sample, the loss mask on what the model should learn to write.
#include <algorithm>
#include <memory>
#include <ostream>
#include <stdexcept>

#include "data/create_hdf5_io.h"
#include "data/packing.h"
#include "data/text/chat_template.h"
#include "data/text/labeled_tokens.h"
#include "data/text/tokenizer_json.h"

namespace zoo::data {
namespace {

const std::string& string_at(const nlohmann::json& j, const std::string& key, const std::string& where,
                             const char* flag) {
  if (!j.contains(key))
    throw std::invalid_argument(where + ": no key '" + key + "' (set " + flag + " to the key your file uses)");
  if (!j[key].is_string())
    throw std::invalid_argument(where + ": '" + key + "' must be a string, got " + j[key].type_name());
  return j[key].get_ref<const std::string&>();
}

// A message's content: text, or a list of parts as OpenAI-style data and Gemma 3's template have them
// ([{"type": "text", "text": ...}]), which the template reads as it is.
nlohmann::json content_at(const nlohmann::json& message, const std::string& key, const std::string& where) {
  if (!message.contains(key))
    throw std::invalid_argument(where + ": no key '" + key +
                                "' (set --multi_turn_content_key to the key your file uses)");
  const auto& content = message[key];
  if (content.is_string()) return content;
  if (content.is_array()) {
    for (size_t k = 0; k < content.size(); ++k)
      if (!content[k].is_object() || !content[k].contains("type") || !content[k]["type"].is_string())
        throw std::invalid_argument(where + ": '" + key + "'[" + std::to_string(k) +
                                    "]: expected a part {\"type\": ..., ...}, got " + content[k].dump().substr(0, 200));
    return content;
  }
  throw std::invalid_argument(where + ": '" + key +
                              "' must be a string or a list of parts ({\"type\": \"text\", \"text\": ...}), got " +
                              content.type_name());
}

std::vector<text::ChatMessage> messages_of(const nlohmann::json& j, const CreateHdf5Options& o,
                                           const std::string& where) {
  if (!j.contains(o.multi_turn_key) || !j[o.multi_turn_key].is_array())
    throw std::invalid_argument(where + ": expected a list of messages under '" + o.multi_turn_key +
                                "' (set --multi_turn_key)");
  std::vector<text::ChatMessage> messages;
  const auto& list = j[o.multi_turn_key];
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = where + ": " + o.multi_turn_key + "[" + std::to_string(i) + "]";
    if (!list[i].is_object()) throw std::invalid_argument(at + ": expected an object with a role and a content");
    messages.push_back({string_at(list[i], o.multi_turn_role_key, at, "--multi_turn_role_key"),
                        content_at(list[i], o.multi_turn_content_key, at)});
  }
  if (messages.empty()) throw std::invalid_argument(where + ": the conversation has no messages");
  return messages;
}

// With --pack: samples wait here until kPackWindow of them are packed together.
class Packer {
 public:
  Packer(SampleWriter& writer, int64_t msl) : writer_(writer), msl_(msl) {}
  void add(text::LabeledTokens t, int64_t length) {
    t.ids.resize(static_cast<size_t>(length));
    t.in_loss.resize(static_cast<size_t>(length));
    pending_.push_back(std::move(t));
    if (static_cast<int64_t>(pending_.size()) == kPackWindow) flush();
  }
  void flush() {
    std::vector<int64_t> columns;
    for (const auto& t : pending_) columns.push_back(static_cast<int64_t>(t.ids.size()) - 1);
    for (const auto& row : best_fit_decreasing(columns, msl_)) {
      std::vector<SampleWriter::Sequence> sequences;
      for (size_t i : row)
        sequences.push_back(
            {pending_[i].ids.data(), static_cast<int64_t>(pending_[i].ids.size()), pending_[i].in_loss.data()});
      writer_.add_packed(sequences);
    }
    pending_.clear();
  }

 private:
  SampleWriter& writer_;
  int64_t msl_;
  std::vector<text::LabeledTokens> pending_;
};

}  // namespace

CreateHdf5Summary create_finetuning_data(const CreateHdf5Options& o, const text::Tokenizer& tokenizer, int64_t eos,
                                         int64_t pad, std::ostream& progress) {
  const bool chat = o.mode == "Chat";
  std::optional<int32_t> sep;
  if (!o.sep_token.empty()) {
    sep = tokenizer.token_to_id(o.sep_token);
    if (!sep)
      throw std::invalid_argument("--sep_token " + o.sep_token +
                                  " is not a token of the tokenizer's vocabulary (zoo does "
                                  "not add tokens: a pretrained model's embedding would have no row for it)");
  }
  std::unique_ptr<text::ChatTemplate> chat_template;
  if (chat) {
    const auto& special = tokenizer.special_tokens();
    if (!o.chat_template_file.empty())
      chat_template = std::make_unique<text::ChatTemplate>(text::read_text_file(o.chat_template_file, "chat template"),
                                                           special, o.chat_template_file);
    else
      chat_template = std::make_unique<text::ChatTemplate>(
          special.chat_template, special,
          special.source.empty() ? "--tokenizer_type " + o.tokenizer.type : special.source);
  }
  const auto files = input_files(o.input_dir, false, progress);
  refuse_existing_dataset(o);
  SampleWriter writer(o, static_cast<int32_t>(pad));
  CreateHdf5Summary s;
  Packer packer(writer, o.max_seq_length);
  const int64_t window = o.max_seq_length + 1;
  write_samples(
      files, writer, s, progress,
      [&](const std::string& file) {
        for_each_json_line(file, [&](const nlohmann::json& j, const std::string& where) {
          text::LabeledTokens t;
          try {
            if (chat)
              t = text::chat_tokens(tokenizer, *chat_template, messages_of(j, o, where),
                                    static_cast<size_t>(o.max_seq_length + 1));
            else
              t = text::prompt_completion_tokens(tokenizer, string_at(j, o.prompt_key, where, "--prompt_key"),
                                                 string_at(j, o.completion_key, where, "--completion_key"), sep,
                                                 static_cast<int32_t>(eos));
          } catch (const std::invalid_argument& e) {
            const std::string what = e.what();
            throw std::invalid_argument(what.rfind(where, 0) == 0 ? what : where + ": " + what);
          }
          ++s.documents;
          s.turns_cut += t.turns_cut;
          int64_t length = static_cast<int64_t>(t.ids.size());
          if (length > window) {
            const bool loss_left =
                std::find(t.in_loss.begin() + 1, t.in_loss.begin() + window, 1) != t.in_loss.begin() + window;
            if (!o.truncate || !loss_left) {
              ++s.dropped;
              return;
            }
            ++s.truncated;
            length = window;
          }
          if (length < 2) {
            ++s.dropped;
            return;
          }
          s.tokens += length;
          ++s.sequences;
          s.columns_filled += length - 1;
          if (o.pack) packer.add(std::move(t), length);
          else writer.add(t.ids.data(), length, t.in_loss.data());
        });
      },
      [&] { packer.flush(); });
  return s;
}

}  // namespace zoo::data
