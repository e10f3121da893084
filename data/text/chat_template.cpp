// Implementation of data/text/chat_template.h with minja.
#include "data/text/chat_template.h"

#include <chrono>
#include <ctime>
#include <minja/minja.hpp>
#include <stdexcept>
#include <utility>

namespace zoo::text {
namespace {

// Bounds of one render: far above what real templates use (a few thousand steps for a long conversation: the
// steps grow with the messages), far below what hangs or exhausts a machine. A probe of two messages gets less.
minja::RenderLimits limits_for(size_t messages, bool probe = false) {
  minja::RenderLimits limits;
  limits.max_depth = 1000;
  limits.max_steps = probe ? 100'000 : 1'000'000 + 200 * messages;
  limits.max_output = probe ? 1 << 20 : ChatTemplate::kMaxOutputBytes;
  limits.has_deadline = true;
  limits.deadline = std::chrono::steady_clock::now() +
                    std::chrono::microseconds(probe ? 500'000 : 10'000'000 + 200 * static_cast<int64_t>(messages));
  return limits;
}

// transformers' strftime_now(format): the local time now, as Python's strftime writes it.
minja::Value strftime_now() {
  return minja::Value::callable([](const std::shared_ptr<minja::Context>&, minja::ArgumentsValue& args) {
    if (args.args.size() != 1 || !args.args[0].is_string() || !args.kwargs.empty())
      throw std::runtime_error("strftime_now(format) takes one format string");
    const std::string format = args.args[0].get<std::string>();
    if (format.size() > 256) throw std::runtime_error("strftime_now: a format longer than 256 characters");
    const std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    std::string out(1024, '\0');
    const size_t n = format.empty() ? 0 : std::strftime(out.data(), out.size(), format.c_str(), &local);
    out.resize(n);
    return minja::Value(out);
  });
}

}  // namespace

struct ChatTemplate::Parsed {
  std::shared_ptr<minja::TemplateNode> root;
};

ChatTemplate::ChatTemplate(const std::string& source, const SpecialTokens& tokens, std::string origin)
    : tokens_(tokens), origin_(std::move(origin)) {
  if (source.empty())
    throw std::invalid_argument(origin_ +
                                ": the tokenizer has no chat_template (tokenizer_config.json's chat_template "
                                "or chat_template.jinja)");
  if (source.size() > kMaxSourceBytes)
    throw std::invalid_argument(origin_ + ": chat_template is " + std::to_string(source.size()) +
                                " bytes; zoo reads templates of up to 1 MiB (real ones are a few KiB)");
  minja::Options options{};
  options.trim_blocks = true;  // transformers' jinja2 environment
  options.lstrip_blocks = true;
  options.keep_trailing_newline = false;
  try {
    parsed_ = std::make_shared<const Parsed>(Parsed{minja::Parser::parse(source, options)});
  } catch (const std::exception& e) {
    throw std::invalid_argument(origin_ + ": chat_template cannot be parsed: " + e.what());
  }
  // A template that ignores add_generation_prompt and appends the prompt anyway: the empty conversation renders as
  // that prompt alone (after bos, for templates that write it first), and every rendering ends with it.
  try {
    const std::vector<ChatMessage> user = {{"user", "x"}}, turn = {{"user", "x"}, {"assistant", "y"}};
    auto probe = [&](const std::vector<ChatMessage>& m, bool prompt) {
      return render(m, prompt, limits_for(m.size(), true));
    };
    if (probe(user, false) == probe(user, true)) {
      std::string prompt = probe({}, false);
      if (!tokens_.bos_token.empty() && prompt.rfind(tokens_.bos_token, 0) == 0)
        prompt.erase(0, tokens_.bos_token.size());
      auto ends_with_prompt = [&](const std::string& text) {
        return text.size() >= prompt.size() && text.compare(text.size() - prompt.size(), prompt.size(), prompt) == 0;
      };
      if (!prompt.empty() && ends_with_prompt(probe(user, false)) && ends_with_prompt(probe(turn, false)))
        unconditional_prompt_ = prompt;
    }
  } catch (const std::invalid_argument&) {
    // A template that refuses these probes (a system message required, say) is left as it is.
  }
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  return render(messages, add_generation_prompt, limits_for(messages.size()));
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                 const minja::RenderLimits& limits) const {
  using json = nlohmann::ordered_json;
  json list = json::array();
  for (const auto& m : messages) list.push_back({{"role", m.role}, {"content", json::parse(m.content.dump())}});
  json values = {{"messages", std::move(list)},    {"add_generation_prompt", add_generation_prompt},
                 {"bos_token", tokens_.bos_token}, {"eos_token", tokens_.eos_token},
                 {"pad_token", tokens_.pad_token}, {"unk_token", tokens_.unk_token}};
  struct Limits {  // this thread's bounds for this render only
    minja::RenderLimits saved = minja::render_limits;
    explicit Limits(const minja::RenderLimits& limits) { minja::render_limits = limits; }
    ~Limits() { minja::render_limits = saved; }
  } bounded(limits);
  try {
    auto context = minja::Context::make(minja::Value(values));
    context->set("strftime_now", strftime_now());
    return parsed_->root->render(context);
  } catch (const std::exception& e) {
    std::string what = e.what();
    // minja reports a filter or function it does not have as calling null.
    for (const char* null_call : {"Value is not callable: null", "Object is not callable: null"})
      if (what.rfind(null_call, 0) == 0)
        what = "a filter or function minja (zoo's Jinja) does not have, or one the template does not define" +
               what.substr(std::string(null_call).size());
    throw std::invalid_argument(origin_ + ": chat_template: " + what);
  }
}

}  // namespace zoo::text
