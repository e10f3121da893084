// Implementation of runner/serve/api.h.
#include "runner/serve/api.h"

#include <cmath>
#include <limits>

namespace zoo::serve {

using nlohmann::json;

namespace {

// The field, or nullptr when absent or null (clients send null for "unset").
const json* field(const json& body, const std::string& key) {
  const auto it = body.find(key);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

std::string kind_of(const json& v) {
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  return std::string(v.is_string() ? "a string" : v.is_boolean() ? "a boolean" : v.is_array() ? "a list" : "an object");
}

[[noreturn]] void bad(const std::string& param, const std::string& expected, const json& got) {
  std::string shown = got.dump(-1, ' ', false, json::error_handler_t::replace);
  if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
  throw ApiError(400, param + ": expected " + expected + " (got " + kind_of(got) + " " + shown + ")", param);
}

// An integer, also written as a whole float (1.0), within [lo, hi].
std::optional<int64_t> integer(const json& body, const std::string& key, int64_t lo, int64_t hi) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  const std::string range = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
  int64_t value = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      bad(key, range, *v);
    value = v->get<int64_t>();
  } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
             std::fabs(v->get<double>()) < 9e15) {
    value = static_cast<int64_t>(v->get<double>());
  } else {
    bad(key, range, *v);
  }
  if (value < lo || value > hi) bad(key, range, *v);
  return value;
}

std::optional<double> number(const json& body, const std::string& key, double lo, double hi,
                             const std::string& expected) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_number() || !(v->get<double>() >= lo && v->get<double>() <= hi)) bad(key, expected, *v);
  return v->get<double>();
}

std::optional<bool> boolean(const json& body, const std::string& key) {
  const json* v = field(body, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) bad(key, "true or false", *v);
  return v->get<bool>();
}

std::vector<int32_t> token_ids(const json& list, const std::string& param) {
  std::vector<int32_t> ids;
  ids.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const json& t = list[i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > std::numeric_limits<int32_t>::max())
      bad(param + "[" + std::to_string(i) + "]", "a token id (an integer >= 0)", t);
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  return ids;
}

std::vector<Prompt> prompts_of(const json& body, const ServeLimits& limits) {
  const json* p = field(body, "prompt");
  if (!p)
    throw ApiError(400, "prompt: required (a string, a list of strings, a list of token ids or a list of such lists)",
                   "prompt");
  const std::string expected = "a string, a list of strings, a list of token ids or a list of such lists";
  std::vector<Prompt> prompts;
  if (p->is_string()) return {Prompt{p->get<std::string>(), {}, false}};
  if (!p->is_array()) bad("prompt", expected, *p);
  if (p->empty()) throw ApiError(400, "prompt: an empty list (expected at least one prompt)", "prompt");
  if ((*p)[0].is_number()) return {Prompt{"", token_ids(*p, "prompt"), true}};
  if (static_cast<int64_t>(p->size()) > limits.max_prompts)
    throw ApiError(400,
                   "prompt: " + std::to_string(p->size()) + " prompts in one request (at most " +
                       std::to_string(limits.max_prompts) + ")",
                   "prompt");
  for (size_t i = 0; i < p->size(); ++i) {
    const json& one = (*p)[i];
    const std::string param = "prompt[" + std::to_string(i) + "]";
    if (one.is_string()) {
      prompts.push_back({one.get<std::string>(), {}, false});
    } else if (one.is_array()) {
      if (one.empty()) throw ApiError(400, param + ": an empty list of token ids", param);
      prompts.push_back({"", token_ids(one, param), true});
    } else {
      bad(param, "a string or a list of token ids", one);
    }
  }
  return prompts;
}

Sampling sampling_of(const json& body, const ServeLimits& limits, bool chat) {
  Sampling s;
  const int64_t max = limits.max_tokens;
  s.max_tokens = integer(body, "max_tokens", 0, max);
  if (chat && !s.max_tokens) s.max_tokens = integer(body, "max_completion_tokens", 0, max);
  s.temperature = number(body, "temperature", 0.0, 2.0, "a number from 0 to 2").value_or(1.0);
  s.top_p = number(body, "top_p", 0.0, 1.0, "a number above 0, at most 1").value_or(1.0);
  if (s.top_p <= 0) bad("top_p", "a number above 0, at most 1", body["top_p"]);
  s.top_k = integer(body, "top_k", -1, std::numeric_limits<int32_t>::max()).value_or(0);
  if (s.top_k < 0) s.top_k = 0;  // vLLM's -1: no limit
  if (const json* seed = field(body, "seed")) {
    if (!seed->is_number_integer()) bad("seed", "an integer", *seed);
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : static_cast<uint64_t>(seed->get<int64_t>());
  }
  if (const json* stop = field(body, "stop")) {
    if (stop->is_string()) {
      s.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array()) {
      if (static_cast<int64_t>(stop->size()) > limits.max_stop)
        throw ApiError(
            400,
            "stop: " + std::to_string(stop->size()) + " stop strings (at most " + std::to_string(limits.max_stop) + ")",
            "stop");
      for (size_t i = 0; i < stop->size(); ++i) {
        if (!(*stop)[i].is_string()) bad("stop[" + std::to_string(i) + "]", "a string", (*stop)[i]);
        s.stop.push_back((*stop)[i].get<std::string>());
      }
    } else {
      bad("stop", "a string or a list of strings", *stop);
    }
    for (const std::string& text : s.stop)
      if (text.empty() || static_cast<int64_t>(text.size()) > limits.max_stop_bytes)
        throw ApiError(400, "stop: each stop string must have 1 to " + std::to_string(limits.max_stop_bytes) + " bytes",
                       "stop");
  }
  s.n = integer(body, "n", 1, limits.max_n).value_or(1);
  s.stream = boolean(body, "stream").value_or(false);
  if (const json* options = field(body, "stream_options")) {
    if (!options->is_object()) bad("stream_options", "an object", *options);
    s.include_usage = boolean(*options, "include_usage").value_or(false);
  }
  s.ignore_eos = boolean(body, "ignore_eos").value_or(false);
  if (chat) {
    // Chat: logprobs is a flag, top_logprobs the number of alternatives.
    if (boolean(body, "logprobs").value_or(false))
      s.logprobs = integer(body, "top_logprobs", 0, limits.max_logprobs).value_or(0);
    else if (field(body, "top_logprobs")) throw ApiError(400, "top_logprobs: needs logprobs: true", "top_logprobs");
  } else {
    s.logprobs = integer(body, "logprobs", 0, limits.max_logprobs);
  }
  return s;
}

std::vector<text::ChatMessage> messages_of(const json& body, const std::string& key) {
  const json* m = field(body, key);
  if (!m) throw ApiError(400, key + ": required (a list of {role, content})", key);
  if (!m->is_array() || m->empty()) bad(key, "a non-empty list of {role, content}", *m);
  std::vector<text::ChatMessage> messages;
  for (size_t i = 0; i < m->size(); ++i) {
    const json& one = (*m)[i];
    const std::string param = key + "[" + std::to_string(i) + "]";
    if (!one.is_object()) bad(param, "an object {role, content}", one);
    const json* role = field(one, "role");
    if (!role || !role->is_string()) throw ApiError(400, param + ".role: required (a string)", param + ".role");
    const json* content = field(one, "content");
    if (content && !content->is_string() && !content->is_array())
      bad(param + ".content", "a string or a list of content parts", *content);
    messages.push_back({role->get<std::string>(), content ? *content : json("")});
  }
  return messages;
}

}  // namespace

json parse_body(const std::string& body, const ServeLimits& limits) {
  if (body.size() > limits.max_body_bytes)
    throw ApiError(413, "the request body has " + std::to_string(body.size()) + " bytes (at most " +
                            std::to_string(limits.max_body_bytes) + ")");
  json parsed;
  try {
    parsed = json::parse(body, [&](int depth, json::parse_event_t, json&) {
      if (depth > limits.max_json_depth)
        throw ApiError(400, "the request body nests deeper than " + std::to_string(limits.max_json_depth) + " levels");
      return true;
    });
  } catch (const json::exception& e) {
    throw ApiError(400, std::string("the request body is not JSON: ") + e.what());
  }
  if (!parsed.is_object()) throw ApiError(400, "the request body must be a JSON object (got " + kind_of(parsed) + ")");
  return parsed;
}

CompletionRequest parse_completion_request(const json& body, const ServeLimits& limits) {
  CompletionRequest r;
  r.prompts = prompts_of(body, limits);
  r.sampling = sampling_of(body, limits, /*chat=*/false);
  r.echo = boolean(body, "echo").value_or(false);
  if (!r.sampling.max_tokens) r.sampling.max_tokens = 16;  // OpenAI's default for completions
  if (static_cast<int64_t>(r.prompts.size()) * r.sampling.n > limits.max_prompts)
    throw ApiError(400,
                   "n: " + std::to_string(r.prompts.size()) + " prompts x n " + std::to_string(r.sampling.n) +
                       " choices is over " + std::to_string(limits.max_prompts),
                   "n");
  return r;
}

ChatRequest parse_chat_request(const json& body, const ServeLimits& limits) {
  ChatRequest r;
  r.messages = messages_of(body, "messages");
  r.sampling = sampling_of(body, limits, /*chat=*/true);
  r.add_generation_prompt = boolean(body, "add_generation_prompt").value_or(true);
  return r;
}

TokenizeRequest parse_tokenize_request(const json& body) {
  TokenizeRequest r;
  if (field(body, "messages")) {
    r.messages = messages_of(body, "messages");
    r.add_special_tokens = boolean(body, "add_special_tokens").value_or(false);  // the template writes them
  } else {
    const json* p = field(body, "prompt");
    if (!p) throw ApiError(400, "prompt: required (a string), or messages", "prompt");
    if (!p->is_string()) bad("prompt", "a string", *p);
    r.prompt = p->get<std::string>();
    r.add_special_tokens = boolean(body, "add_special_tokens").value_or(true);
  }
  r.add_generation_prompt = boolean(body, "add_generation_prompt").value_or(true);
  return r;
}

std::vector<int32_t> parse_detokenize_request(const json& body) {
  const json* t = field(body, "tokens");
  if (!t) throw ApiError(400, "tokens: required (a list of token ids)", "tokens");
  if (!t->is_array()) bad("tokens", "a list of token ids", *t);
  return token_ids(*t, "tokens");
}

json error_json(const ApiError& e) {
  return {{"error",
           {{"message", e.what()},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.status}}}};
}

std::string dump_json(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace zoo::serve
