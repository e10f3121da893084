// zoo serve's request parsing (runner/serve/api.h): what OpenAI clients and
// lm-eval send is read as they mean it; a bad request is an ApiError with a
// 4xx status naming the field; no body, however mangled, gets past with
// anything but an ApiError.
#include <gtest/gtest.h>

#include <random>

#include "runner/serve/api.h"

namespace zoo::serve {
namespace {

using nlohmann::json;

const ServeLimits kLimits;

CompletionRequest completion(const std::string& body) {
  return parse_completion_request(parse_body(body, kLimits), kLimits);
}
ChatRequest chat(const std::string& body) { return parse_chat_request(parse_body(body, kLimits), kLimits); }

// The ApiError a body raises (status 0 when it raised none).
ApiError refusal(const std::string& body, bool is_chat = false) {
  try {
    is_chat ? (void)chat(body) : (void)completion(body);
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "accepted");
}

TEST(ServeApi, ReadsLmEvalsLoglikelihoodPayload) {
  // As lm-eval's local-completions builds it for loglikelihood requests (batch of two, token ids).
  const CompletionRequest r = completion(
      R"({"model": "zoo", "prompt": [[1, 5, 9], [1, 7]], "temperature": 0, "max_tokens": 1, "logprobs": 1,
          "seed": 1234, "echo": true})");
  ASSERT_EQ(r.prompts.size(), 2u);
  EXPECT_TRUE(r.prompts[0].tokenized);
  EXPECT_EQ(r.prompts[0].ids, (std::vector<int32_t>{1, 5, 9}));
  EXPECT_EQ(r.prompts[1].ids, (std::vector<int32_t>{1, 7}));
  EXPECT_EQ(*r.sampling.max_tokens, 1);
  EXPECT_EQ(r.sampling.temperature, 0.0);
  EXPECT_EQ(*r.sampling.logprobs, 1);
  EXPECT_EQ(*r.sampling.seed, 1234u);
  EXPECT_TRUE(r.echo);
}

TEST(ServeApi, ReadsEveryPromptShape) {
  EXPECT_EQ(completion(R"({"prompt": "Hi"})").prompts.at(0).text, "Hi");
  EXPECT_EQ(*completion(R"({"prompt": "Hi"})").sampling.max_tokens, 16) << "OpenAI's default for completions";
  const auto texts = completion(R"({"prompt": ["a", "b"], "stop": "\n", "n": 2, "max_tokens": 0})");
  EXPECT_EQ(texts.prompts.size(), 2u);
  EXPECT_EQ(texts.sampling.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(texts.sampling.n, 2);
  EXPECT_EQ(*texts.sampling.max_tokens, 0) << "max_tokens 0 scores without generating";
  EXPECT_EQ(completion(R"({"prompt": [3, 4]})").prompts.at(0).ids, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(*completion(R"({"prompt": "x", "max_tokens": 5.0, "seed": null})").sampling.max_tokens, 5)
      << "a whole float counts; null is unset";
  EXPECT_FALSE(completion(R"({"prompt": "x", "seed": null})").sampling.seed.has_value());
  EXPECT_EQ(completion(R"({"prompt": "x", "some_extension": {"a": 1}})").prompts.size(), 1u)
      << "unknown fields are ignored";
  const ChatRequest c = chat(R"({"messages": [{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
                                 "logprobs": true, "top_logprobs": 3, "max_completion_tokens": 7, "stream": true,
                                 "stream_options": {"include_usage": true}})");
  ASSERT_EQ(c.messages.size(), 2u);
  EXPECT_EQ(c.messages[1].content[0]["text"], "Hi");
  EXPECT_EQ(*c.sampling.logprobs, 3);
  EXPECT_EQ(*c.sampling.max_tokens, 7);
  EXPECT_TRUE(c.sampling.stream && c.sampling.include_usage);
  EXPECT_FALSE(chat(R"({"messages": [{"role": "user", "content": "Hi"}]})").sampling.max_tokens.has_value())
      << "chat's default: the rest of the context";
}

TEST(ServeApi, BadRequestsNameTheField) {
  struct Case {
    std::string body;
    int status;
    std::string param;
    std::string says;
    bool is_chat = false;
  };
  const std::vector<Case> cases = {
      {R"({"prompt": "x")", 400, "", "not JSON"},
      {R"([1, 2])", 400, "", "JSON object"},
      {R"({"max_tokens": 3})", 400, "prompt", "prompt: required"},
      {R"({"prompt": 5})", 400, "prompt", "expected a string, a list"},
      {R"({"prompt": []})", 400, "prompt", "empty list"},
      {R"({"prompt": [[1, 2], "x", {"a": 1}]})", 400, "prompt[2]", "a string or a list of token ids"},
      {R"({"prompt": [[1, -2]]})", 400, "prompt[0][1]", "token id"},
      {R"({"prompt": [[]]})", 400, "prompt[0]", "empty list of token ids"},
      {R"({"prompt": "x", "max_tokens": "5"})", 400, "max_tokens", "integer from 0 to 4096"},
      {R"({"prompt": "x", "max_tokens": 5000})", 400, "max_tokens", "integer from 0 to 4096"},
      {R"({"prompt": "x", "max_tokens": 1.5})", 400, "max_tokens", "integer"},
      {R"({"prompt": "x", "temperature": -1})", 400, "temperature", "from 0 to 2"},
      {R"({"prompt": "x", "top_p": 0})", 400, "top_p", "above 0"},
      {R"({"prompt": "x", "n": 0})", 400, "n", "from 1 to 16"},
      {R"({"prompt": "x", "logprobs": 21})", 400, "logprobs", "from 0 to 20"},
      {R"({"prompt": "x", "stop": ["a", 3]})", 400, "stop[1]", "a string"},
      {R"({"prompt": "x", "stop": ""})", 400, "stop", "1 to 256 bytes"},
      {R"({"prompt": "x", "stop": ["1","2","3","4","5","6","7","8","9"]})", 400, "stop", "at most 8"},
      {R"({"prompt": "x", "stream": "yes"})", 400, "stream", "true or false"},
      {R"({"prompt": "x", "seed": "1"})", 400, "seed", "an integer"},
      {R"({"prompt": "x", "echo": 1})", 400, "echo", "true or false"},
      {R"({"prompt": ["a", "b"], "n": 16, "max_tokens": 1})", 200, "", ""},
      {R"({"messages": "hi"})", 400, "messages", "non-empty list", true},
      {R"({"messages": [{"content": "hi"}]})", 400, "messages[0].role", "required", true},
      {R"({"messages": [{"role": "user", "content": 5}]})", 400, "messages[0].content", "a string or a list", true},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", 400, "top_logprobs", "logprobs: true",
       true},
  };
  for (const Case& c : cases) {
    const ApiError e = refusal(c.body, c.is_chat);
    if (c.status == 200) {
      EXPECT_EQ(e.status, 0) << c.body << ": " << e.what();
      continue;
    }
    EXPECT_EQ(e.status, c.status) << c.body << ": " << e.what();
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << c.body << " -> " << e.what();
    const json body = error_json(e);
    EXPECT_EQ(body["error"]["message"], e.what());
    EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  }
}

TEST(ServeApi, BodiesAreBoundedInSizeAndNesting) {
  ServeLimits small;
  small.max_body_bytes = 100;
  try {
    parse_body(R"({"prompt": ")" + std::string(200, 'x') + "\"}", small);
    FAIL() << "a 211-byte body passed a 100-byte limit";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 413);
  }
  // 100,000 nested lists: refused at depth 33, never parsed all the way down.
  const std::string deep = R"({"prompt": )" + std::string(100000, '[') + std::string(100000, ']') + "}";
  ServeLimits roomy;
  roomy.max_body_bytes = 1 << 20;
  try {
    parse_body(deep, roomy);
    FAIL() << "100,000 levels of nesting were accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(std::string(e.what()).find("deeper than 32"), std::string::npos) << e.what();
  }
}

// Random edits of valid bodies (bytes flipped, cut, repeated, values swapped for other JSON values): each is
// accepted or refused with an ApiError of status 4xx; nothing else escapes.
TEST(ServeApi, MangledBodiesAreRefusedCleanly) {
  const std::vector<std::string> seeds = {
      R"({"model": "m", "prompt": [[1, 5, 9], [1, 7]], "temperature": 0, "max_tokens": 1, "logprobs": 1, "echo": true})",
      R"({"prompt": ["Once upon", "a time"], "stop": ["\n", "."], "n": 3, "top_p": 0.9, "seed": 7, "stream": true})",
      R"({"messages": [{"role": "user", "content": "Hi"}], "logprobs": true, "top_logprobs": 2, "max_tokens": 9})",
  };
  const std::vector<std::string> values = {"null",        "true", "-1",          "1e309", "18446744073709551616",
                                           "\"\"",        "[]",   "{}",          "[[]]",  "[-5]",
                                           "\"\\ud800\"", "0.5",  "[[1,2],[3]]", "4097"};
  std::mt19937 rng(11);
  int accepted = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string body = seeds[rng() % seeds.size()];
    const int edits = 1 + rng() % 3;
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % body.size();
      switch (rng() % 4) {
        case 0: body[at] = static_cast<char>(rng() % 256); break;
        case 1: body.resize(at); break;
        case 2: body.insert(at, body.substr(at, rng() % 16)); break;
        default: {
          const size_t colon = body.find(':', at);
          if (colon == std::string::npos) break;
          const size_t end = body.find_first_of(",}", colon);
          body.replace(colon + 1, end == std::string::npos ? 0 : end - colon - 1, values[rng() % values.size()]);
        }
      }
      if (body.empty()) body = "{";
    }
    try {
      const json parsed = parse_body(body, kLimits);
      if (parsed.contains("messages")) parse_chat_request(parsed, kLimits);
      else parse_completion_request(parsed, kLimits);
      ++accepted;
    } catch (const ApiError& e) {
      ASSERT_GE(e.status, 400) << body;
      ASSERT_LT(e.status, 500) << body;
      ++refused;
    }
  }
  EXPECT_GT(accepted, 100);
  EXPECT_GT(refused, 10000);
}

}  // namespace
}  // namespace zoo::serve
