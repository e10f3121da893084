// Implementation of data/text/chat_template.h with minja.
#include "data/text/chat_template.h"

#include <minja/minja.hpp>

#include <stdexcept>
#include <utility>

namespace zoo::text {

struct ChatTemplate::Parsed {
  std::shared_ptr<minja::TemplateNode> root;
};

ChatTemplate::ChatTemplate(const std::string& source, const SpecialTokens& tokens, std::string origin)
    : tokens_(tokens), origin_(std::move(origin)) {
  if (source.empty())
    throw std::invalid_argument(origin_ + ": the tokenizer has no chat_template (tokenizer_config.json's chat_template "
                                "or chat_template.jinja)");
  minja::Options options{};
  options.trim_blocks = true;  // transformers' jinja2 environment
  options.lstrip_blocks = true;
  options.keep_trailing_newline = false;
  try {
    parsed_ = std::make_shared<const Parsed>(Parsed{minja::Parser::parse(source, options)});
  } catch (const std::exception& e) {
    throw std::invalid_argument(origin_ + ": chat_template cannot be parsed: " + e.what());
  }
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  using json = nlohmann::ordered_json;
  json list = json::array();
  for (const auto& m : messages) list.push_back({{"role", m.role}, {"content", m.content}});
  json values = {{"messages", std::move(list)},
                 {"add_generation_prompt", add_generation_prompt},
                 {"bos_token", tokens_.bos_token},
                 {"eos_token", tokens_.eos_token},
                 {"pad_token", tokens_.pad_token},
                 {"unk_token", tokens_.unk_token}};
  try {
    auto context = minja::Context::make(minja::Value(values));
    return parsed_->root->render(context);
  } catch (const std::exception& e) {
    std::string what = e.what();
    // minja reports a filter or function it does not have as calling null.
    if (what.rfind("Value is not callable: null", 0) == 0)
      what = "a filter or function minja (zoo's Jinja) does not have, or one the template does not define" +
             what.substr(std::string("Value is not callable: null").size());
    throw std::invalid_argument(origin_ + ": chat_template: " + what);
  }
}

}  // namespace zoo::text
