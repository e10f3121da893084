// Implementation of runner/serve/completions.h.
#include "runner/serve/completions.h"

#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <mutex>
#include <random>

namespace zoo::serve {

using nlohmann::json;

namespace {

const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD: what a character cut between tokens decodes to

// One choice: a prompt and what the model made of it.
struct Row {
  std::vector<int32_t> prompt;
  std::string prompt_text;
  std::vector<Step> prompt_steps;
  std::vector<int32_t> generated;
  std::vector<Step> steps;
  std::string text;  // the generated text, cut before a stop string
  bool stopped_by_string = false;
  // Streaming: what the client has been sent.
  bool sent_prompt = false;
  size_t sent_text = 0;
  size_t sent_steps = 0;
  bool sent_role = false;
  // Completions' logprobs: where the next reported token's text starts (text_offset), across chunks too.
  size_t text_offset = 0;
};

}  // namespace

struct CompletionService::Run {
  bool chat = false;
  bool echo = false;
  Sampling sampling;
  int64_t max_tokens = 0;
  std::string id;
  int64_t created = 0;
  std::vector<Row> rows;
  int64_t prompt_tokens = 0;
  // Chunks the engine's thread made and the request's thread has not written yet.
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<std::string> chunks;
};

CompletionService::CompletionService(Engine& engine, const text::Tokenizer& tokenizer, std::string model_name,
                                     ServeLimits limits)
    : engine_(engine),
      tokenizer_(tokenizer),
      model_name_(std::move(model_name)),
      limits_(limits),
      created_(static_cast<int64_t>(std::time(nullptr))) {}

std::string CompletionService::token_text(int32_t id) const {
  if (id >= tokenizer_.vocab_size()) return kReplacement;  // the model's vocabulary may be padded past the tokenizer's
  return tokenizer_.decode({id});
}

namespace {

// The end of `text` that could be the start of a stop string: held back from a stream until it is known.
size_t stop_prefix_at_end(const std::string& text, const std::vector<std::string>& stops) {
  size_t hold = 0;
  for (const std::string& stop : stops)
    for (size_t n = std::min(stop.size() - 1, text.size()); n > hold; --n)
      if (text.compare(text.size() - n, n, stop, 0, n) == 0) {
        hold = n;
        break;
      }
  return hold;
}

// Completions' logprobs: parallel lists, a dict of the alternatives (and the chosen token) per position.
json completion_logprobs(const std::vector<Step>& steps, size_t& offset,
                         const std::function<std::string(int32_t)>& token_text) {
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
  for (const Step& s : steps) {
    const std::string text = token_text(s.token);
    tokens.push_back(text);
    offsets.push_back(offset);
    offset += text.size();
    if (!s.logprob) {
      token_logprobs.push_back(nullptr);
      top_logprobs.push_back(nullptr);
      continue;
    }
    token_logprobs.push_back(*s.logprob);
    json top = json::object();
    auto put = [&](int32_t id, float logprob) {
      const std::string key = token_text(id);
      if (!top.contains(key) || top[key].get<double>() < logprob) top[key] = logprob;
    };
    for (const TokenLogprob& t : s.top) put(t.id, t.logprob);
    put(s.token, *s.logprob);
    top_logprobs.push_back(top);
  }
  return {
      {"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs}, {"text_offset", offsets}};
}

json bytes_of(const std::string& text) {
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(c);
  return bytes;
}

// Chat's logprobs: one entry per token with its alternatives.
json chat_logprobs(const std::vector<Step>& steps, const std::function<std::string(int32_t)>& token_text) {
  json content = json::array();
  for (const Step& s : steps) {
    json top = json::array();
    for (const TokenLogprob& t : s.top) {
      const std::string text = token_text(t.id);
      top.push_back({{"token", text}, {"logprob", t.logprob}, {"bytes", bytes_of(text)}});
    }
    const std::string text = token_text(s.token);
    content.push_back(
        {{"token", text}, {"logprob", s.logprob.value_or(0.0f)}, {"bytes", bytes_of(text)}, {"top_logprobs", top}});
  }
  return {{"content", content}};
}

}  // namespace

std::shared_ptr<CompletionService::Run> CompletionService::prepare(const CompletionRequest& request) {
  auto r = std::make_shared<Run>();
  r->echo = request.echo;
  r->sampling = request.sampling;
  r->max_tokens = *request.sampling.max_tokens;
  const int64_t vocab = engine_.vocab_size();
  for (size_t p = 0; p < request.prompts.size(); ++p) {
    const Prompt& prompt = request.prompts[p];
    const std::string param = request.prompts.size() == 1 ? "prompt" : "prompt[" + std::to_string(p) + "]";
    Row row;
    if (prompt.tokenized) {
      row.prompt = prompt.ids;
      for (size_t i = 0; i < row.prompt.size(); ++i)
        if (row.prompt[i] >= vocab)
          throw ApiError(400,
                         param + "[" + std::to_string(i) + "]: token id " + std::to_string(row.prompt[i]) +
                             " is outside the model's vocabulary (" + std::to_string(vocab) + " ids)",
                         param);
      row.prompt_text = text::decode_generated(tokenizer_, row.prompt);
    } else {
      // As transformers' tokenizer(prompt) and vLLM do: with the tokenizer's bos.
      row.prompt = tokenizer_.encode_with_special_tokens(prompt.text);
      row.prompt_text = prompt.text;
    }
    if (row.prompt.empty())
      throw ApiError(400, param + ": empty (the tokenizer adds no bos token to start from)", param);
    const int64_t length = static_cast<int64_t>(row.prompt.size());
    if (length + r->max_tokens > engine_.context())
      throw ApiError(400,
                     param + ": " + std::to_string(length) + " tokens + max_tokens " + std::to_string(r->max_tokens) +
                         " is more than the model's " + std::to_string(engine_.context()) + " positions",
                     length > engine_.context() ? param : "max_tokens");
    r->prompt_tokens += length;
    for (int64_t i = 0; i < request.sampling.n; ++i) r->rows.push_back(row);
  }
  return r;
}

std::string CompletionService::render_chat(const std::vector<text::ChatMessage>& messages,
                                           bool add_generation_prompt) const {
  const text::SpecialTokens& special = tokenizer_.special_tokens();
  if (special.chat_template.empty())
    throw ApiError(400,
                   "messages: this model's tokenizer has no chat template (tokenizer_config.json's chat_template); "
                   "use /v1/completions",
                   "messages");
  try {
    const text::ChatTemplate chat(special.chat_template, special,
                                  special.source.empty() ? model_name_ : special.source);
    return chat.render(messages, add_generation_prompt);
  } catch (const std::exception& e) {
    throw ApiError(400, std::string("messages: the chat template cannot render them: ") + e.what(), "messages");
  }
}

std::shared_ptr<CompletionService::Run> CompletionService::prepare(const ChatRequest& request) {
  auto r = std::make_shared<Run>();
  r->chat = true;
  r->sampling = request.sampling;
  Row row;
  // The template writes the special tokens, as apply_chat_template's text does.
  row.prompt = tokenizer_.encode(render_chat(request.messages, request.add_generation_prompt));
  if (row.prompt.empty()) throw ApiError(400, "messages: the chat template renders them as no text", "messages");
  const int64_t length = static_cast<int64_t>(row.prompt.size());
  const int64_t room = engine_.context() - length;
  r->max_tokens = request.sampling.max_tokens.value_or(std::min(room, limits_.max_tokens));
  if (room < std::max<int64_t>(r->max_tokens, 1))
    throw ApiError(400,
                   "messages: " + std::to_string(length) + " tokens after the chat template + max_tokens " +
                       std::to_string(r->max_tokens) + " is more than the model's " +
                       std::to_string(engine_.context()) + " positions",
                   room < 1 ? "messages" : "max_tokens");
  r->prompt_tokens = length;
  for (int64_t i = 0; i < request.sampling.n; ++i) r->rows.push_back(row);
  return r;
}

bool CompletionService::streams(const Run& run) const { return run.sampling.stream; }

json CompletionService::respond(Run& r, const StreamWriter& write) {
  static std::atomic<uint64_t> next_id{1};
  r.id = (r.chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++);
  r.created = static_cast<int64_t>(std::time(nullptr));
  const bool streaming = r.sampling.stream && write;
  const std::string object = r.chat ? (streaming ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  const auto text_of = [this](int32_t id) { return token_text(id); };
  auto chunk = [&](size_t index, Row& row, bool finished) {
    // The row's new text (whole characters, no tail that may start a stop string) and logprobs, as one chunk.
    std::string stable = row.text;
    if (!finished) {
      stable.resize(text::settled_prefix(stable));
      stable.resize(stable.size() - stop_prefix_at_end(stable, r.sampling.stop));
    }
    std::string delta = stable.size() > row.sent_text ? stable.substr(row.sent_text) : "";
    std::vector<Step> steps;
    if (r.echo && !row.sent_prompt) {
      delta = row.prompt_text + delta;
      steps = row.prompt_steps;
      row.sent_prompt = true;
    }
    steps.insert(steps.end(), row.steps.begin() + row.sent_steps, row.steps.end());
    const bool with_logprobs = r.sampling.logprobs.has_value();
    if (delta.empty() && !finished && (!with_logprobs || steps.empty())) return json();
    row.sent_text = std::max(row.sent_text, stable.size());
    row.sent_steps = row.steps.size();
    json choice = {{"index", index}, {"finish_reason", nullptr}};
    if (finished)
      choice["finish_reason"] =
          !row.stopped_by_string && int64_t(row.generated.size()) >= r.max_tokens ? "length" : "stop";
    if (r.chat) {
      json d = json::object();
      if (!row.sent_role) d["role"] = "assistant";
      row.sent_role = true;
      if (!delta.empty() || !finished) d["content"] = delta;
      choice["delta"] = d;
      choice["logprobs"] = with_logprobs && !steps.empty() ? chat_logprobs(steps, text_of) : json(nullptr);
    } else {
      choice["text"] = delta;
      choice["logprobs"] =
          with_logprobs && !steps.empty() ? completion_logprobs(steps, row.text_offset, text_of) : json(nullptr);
    }
    return json{
        {"id", r.id}, {"object", object}, {"created", r.created}, {"model", model_name_}, {"choices", {choice}}};
  };

  // Without echo a choice's text_offset counts from the prompt's start, as OpenAI's legacy API.
  for (Row& row : r.rows) row.text_offset = r.echo ? 0 : row.prompt_text.size();
  auto job = std::make_shared<EngineJob>();
  for (const Row& row : r.rows) job->rows.push_back(row.prompt);
  job->max_tokens = r.max_tokens;
  job->temperature = r.sampling.temperature;
  job->top_p = r.sampling.top_p;
  job->top_k = r.sampling.top_k;
  job->seed = r.sampling.seed ? *r.sampling.seed : std::random_device()();
  job->top_logprobs = r.sampling.logprobs.value_or(0);
  job->prompt_logprobs = r.echo && r.sampling.logprobs.has_value();
  const auto& eos = tokenizer_.special_tokens().eos;
  if (eos && !r.sampling.ignore_eos) job->stop_tokens.push_back(*eos);
  job->on_prompt = [&r](size_t row, std::vector<Step> steps) { r.rows[row].prompt_steps = std::move(steps); };
  job->on_token = [&, streaming](size_t index, const Step& step) {
    Row& row = r.rows[index];
    row.generated.push_back(step.token);
    row.steps.push_back(step);
    const std::string text = text::decode_generated(tokenizer_, row.generated);
    RowAction action = RowAction::next;
    size_t cut = std::string::npos;
    for (const std::string& stop : r.sampling.stop) cut = std::min(cut, text.find(stop));
    if (cut != std::string::npos) {
      row.text = text.substr(0, cut);
      row.stopped_by_string = true;
      action = RowAction::finish_row;
    } else {
      row.text = text;
    }
    if (streaming && action == RowAction::next) {
      json c = chunk(index, row, false);
      if (!c.is_null()) {
        std::lock_guard<std::mutex> lock(r.mutex);
        r.chunks.push_back(dump_json(c));
      }
      r.ready.notify_one();
    }
    return action;
  };

  std::future<void> done = engine_.submit(job);
  if (streaming) {
    // Written here, not on the engine's thread: a slow client never holds up the model.
    bool connected = true;
    auto flush = [&] {
      std::deque<std::string> ready;
      {
        std::lock_guard<std::mutex> lock(r.mutex);
        ready.swap(r.chunks);
      }
      for (const std::string& c : ready)
        if (connected && !write(c)) connected = false;
    };
    while (done.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
      {
        std::unique_lock<std::mutex> lock(r.mutex);
        r.ready.wait_for(lock, std::chrono::milliseconds(50), [&] { return !r.chunks.empty(); });
      }
      flush();
      if (!connected) job->cancelled = true;  // the engine drops the job at its next step and frees its slot
    }
    flush();
    try {
      done.get();
    } catch (const ApiError& e) {
      if (connected) write(dump_json(error_json(e)));
      return json();
    } catch (const std::exception& e) {
      if (connected) write(dump_json(error_json(ApiError(500, e.what(), "", "server_error"))));
      return json();
    }
    for (size_t i = 0; i < r.rows.size() && connected; ++i) {
      json c = chunk(i, r.rows[i], true);
      if (!c.is_null()) connected = write(dump_json(c));
    }
    int64_t generated = 0;
    for (const Row& row : r.rows) generated += row.generated.size();
    if (connected && r.sampling.include_usage)
      connected = write(dump_json({{"id", r.id},
                                   {"object", object},
                                   {"created", r.created},
                                   {"model", model_name_},
                                   {"choices", json::array()},
                                   {"usage",
                                    {{"prompt_tokens", r.prompt_tokens},
                                     {"completion_tokens", generated},
                                     {"total_tokens", r.prompt_tokens + generated}}}}));
    if (connected) write("[DONE]");
    return json();
  }
  done.get();
  json choices = json::array();
  int64_t generated = 0;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    Row& row = r.rows[i];
    generated += row.generated.size();
    const char* reason = !row.stopped_by_string && int64_t(row.generated.size()) >= r.max_tokens ? "length" : "stop";
    json choice = {{"index", i}, {"finish_reason", reason}};
    const bool with_logprobs = r.sampling.logprobs.has_value();
    if (r.chat) {
      choice["message"] = {{"role", "assistant"}, {"content", row.text}};
      choice["logprobs"] = with_logprobs ? chat_logprobs(row.steps, text_of) : json(nullptr);
    } else {
      std::vector<Step> steps = r.echo ? row.prompt_steps : std::vector<Step>();
      steps.insert(steps.end(), row.steps.begin(), row.steps.end());
      choice["text"] = (r.echo ? row.prompt_text : "") + row.text;
      choice["logprobs"] = with_logprobs ? completion_logprobs(steps, row.text_offset, text_of) : json(nullptr);
    }
    choices.push_back(choice);
  }
  return {{"id", r.id},
          {"object", object},
          {"created", r.created},
          {"model", model_name_},
          {"choices", choices},
          {"usage",
           {{"prompt_tokens", r.prompt_tokens},
            {"completion_tokens", generated},
            {"total_tokens", r.prompt_tokens + generated}}}};
}

json CompletionService::tokenize(const TokenizeRequest& request) const {
  std::vector<int32_t> ids;
  if (request.messages) {
    const std::string text = render_chat(*request.messages, request.add_generation_prompt);
    ids = request.add_special_tokens ? tokenizer_.encode_with_special_tokens(text) : tokenizer_.encode(text);
  } else {
    ids = request.add_special_tokens ? tokenizer_.encode_with_special_tokens(request.prompt)
                                     : tokenizer_.encode(request.prompt);
  }
  return {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", engine_.context()}};
}

json CompletionService::detokenize(const std::vector<int32_t>& tokens) const {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] >= tokenizer_.vocab_size())
      throw ApiError(400,
                     "tokens[" + std::to_string(i) + "]: token id " + std::to_string(tokens[i]) +
                         " is outside the tokenizer's vocabulary (" + std::to_string(tokenizer_.vocab_size()) + " ids)",
                     "tokens");
  return {{"prompt", tokenizer_.decode_like_transformers(tokens)}};
}

json CompletionService::tokenizer_info() const {
  const text::SpecialTokens& s = tokenizer_.special_tokens();
  auto text_or_null = [](const std::string& t) { return t.empty() ? json(nullptr) : json(t); };
  return {{"eos_token", text_or_null(s.eos_token)},         {"bos_token", text_or_null(s.bos_token)},
          {"pad_token", text_or_null(s.pad_token)},         {"unk_token", text_or_null(s.unk_token)},
          {"chat_template", text_or_null(s.chat_template)}, {"add_bos_token", s.add_bos},
          {"model_max_length", engine_.context()},          {"vocab_size", tokenizer_.vocab_size()}};
}

json CompletionService::models() const {
  return {{"object", "list"},
          {"data",
           {{{"id", model_name_},
             {"object", "model"},
             {"created", created_},
             {"owned_by", "zoo"},
             {"max_model_len", engine_.context()}}}}};
}

}  // namespace zoo::serve
