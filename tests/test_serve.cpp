// zoo serve end to end, as its clients use it: the zoo binary serving a tiny
// converted Llama with its SentencePiece tokenizer and chat template, driven
// over 127.0.0.1 by an HTTP client. lm-eval's loglikelihood requests against
// a float64 Python forward of the same weights; completions, chat, streams,
// n and stop strings against `zoo generate`; bad requests against the
// promise that they are JSON errors and the server lives on.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "convert_fixtures.h"
#include "serve_fixtures.h"
#include "test_util.h"
#include "tests/tokenizer_fixtures.h"

namespace zoo {
namespace {

using nlohmann::json;
using testing::TempDir;

httplib::Client client_of(const testing::ServeProcess& server) {
  httplib::Client c("127.0.0.1", server.port());
  c.set_read_timeout(120, 0);
  return c;
}

// POST `body` as JSON; the status and the parsed reply.
std::pair<int, json> post(httplib::Client& client, const std::string& path, const std::string& body) {
  const auto res = client.Post(path.c_str(), body, "application/json");
  if (!res) return {0, json{{"client_error", httplib::to_string(res.error())}}};
  return {res->status, json::parse(res->body, nullptr, /*allow_exceptions=*/false)};
}
std::pair<int, json> post(httplib::Client& client, const std::string& path, const json& body) {
  return post(client, path, body.dump());
}

// Two printable ASCII characters from the middle of `text` (a stop string that is valid UTF-8).
std::string ascii_piece(const std::string& text) {
  for (size_t at = text.size() / 3; at + 1 < text.size(); ++at)
    if (text[at] > ' ' && text[at] < 127 && text[at + 1] > ' ' && text[at + 1] < 127) return text.substr(at, 2);
  return "";
}

// Starts a streamed completion and hangs up after its second piece.
void leave_stream(const testing::ServeProcess& server, const json& body) {
  httplib::Client client = client_of(server);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  int pieces = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++pieces < 2; };
  httplib::Response res;
  httplib::Error error;
  client.send(req, res, error);
}

// The data of each server-sent event of a streamed reply.
std::vector<std::string> events(const std::string& body) {
  std::vector<std::string> data;
  for (size_t at = body.find("data: "); at != std::string::npos; at = body.find("data: ", at)) {
    const size_t end = body.find("\n\n", at);
    data.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return data;
}

// What `zoo generate` writes after the prompt (its last newline dropped).
std::string generated(const std::string& model, const std::string& args, const std::string& prompt = "") {
  const auto r = testing::run_command(testing::zoo_binary() + " generate --checkpoint_path " + model + " " + args +
                                      " 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::string text = r.output.substr(0, r.output.size() - 1);
  EXPECT_EQ(text.compare(0, prompt.size(), prompt), 0) << text;
  return text.substr(prompt.size());
}

#define ZOO_SERVE_FIXTURE(dir)                                  \
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();                             \
  ZOO_SKIP_WITHOUT_SENTENCEPIECE();                             \
  const std::string dir = testing::converted_tiny_chat_llama(); \
  ASSERT_FALSE(dir.empty()) << "the tiny Llama fixture could not be made"

TEST(Serve, LmEvalLoglikelihoodRequestsMatchAFloat64Forward) {
  ZOO_SERVE_FIXTURE(dir);
  testing::ServeProcess server("--checkpoint_path " + dir + "/base");
  ASSERT_GT(server.port(), 0) << server.log();
  // lm-eval's requests: context + continuation token ids (bos first), of three lengths in one batch.
  std::mt19937 rng(3);
  std::vector<std::vector<int>> prompts;
  for (int length : {9, 23, 5}) {
    std::vector<int> ids{1};
    for (int i = 1; i < length; ++i) ids.push_back(3 + rng() % 517);
    prompts.push_back(ids);
  }
  TempDir oracle;
  testing::write_file(oracle / "prompts.json", json(prompts).dump());
  std::filesystem::create_directories(oracle / "hf");
  std::filesystem::copy(dir + "/hf/config.json", oracle / "hf/config.json");
  std::filesystem::copy(dir + "/hf/model.safetensors", oracle / "hf/model.safetensors");
  testing::run_fixture(oracle, "logprobs.py",
                       testing::oracle("llama_float64_prelude.py") + testing::oracle("serve_llama_logprobs.py"));
  const json expected = json::parse(testing::read_file(oracle / "logprobs.json"));
  // Each prompt continued by the reference's greedy tokens: positions lm-eval's greedy check must call greedy.
  for (size_t i = 0; i < prompts.size(); ++i) prompts[i] = expected[i]["ids"].get<std::vector<int>>();

  httplib::Client client = client_of(server);
  // lm-eval's local-completions payload for loglikelihood (its _create_payload, generate=False).
  const auto [status, reply] = post(client, "/v1/completions",
                                    json{{"model", "zoo"},
                                         {"prompt", prompts},
                                         {"temperature", 0},
                                         {"max_tokens", 1},
                                         {"logprobs", 1},
                                         {"seed", 1234},
                                         {"echo", true}});
  ASSERT_EQ(status, 200) << reply.dump();
  ASSERT_EQ(reply["choices"].size(), prompts.size());
  int greedy_checks = 0, greedy_true = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const json& choice = reply["choices"][i];
    EXPECT_EQ(choice["index"], i);
    const json& lp = choice["logprobs"];
    const size_t n = prompts[i].size();
    ASSERT_EQ(lp["token_logprobs"].size(), n + 1) << "every prompt token and the one generated";
    EXPECT_TRUE(lp["token_logprobs"][0].is_null()) << "the first token has no logprob";
    EXPECT_TRUE(lp["top_logprobs"][0].is_null());
    for (size_t t = 1; t < n; ++t) {
      EXPECT_NEAR(lp["token_logprobs"][t].get<double>(), expected[i]["logprobs"][t - 1].get<double>(), 1e-4)
          << "prompt " << i << " position " << t;
      // lm-eval's greedy check: the token's logprob is the largest in top_logprobs.
      double top = -1e30;
      for (const auto& [token, value] : lp["top_logprobs"][t].items()) top = std::max(top, value.get<double>());
      const bool greedy = lp["token_logprobs"][t].get<double>() == top;
      EXPECT_EQ(greedy, expected[i]["greedy"][t - 1].get<bool>()) << "prompt " << i << " position " << t;
      ++greedy_checks;
      greedy_true += greedy;
    }
    EXPECT_EQ(choice["finish_reason"], "length");
  }
  EXPECT_GE(greedy_true, 12) << "the 4 greedy tokens of each prompt, of " << greedy_checks;
  // max_tokens 0: the prompt scored, nothing generated.
  const auto [status0, reply0] =
      post(client, "/v1/completions", json{{"prompt", prompts[0]}, {"max_tokens", 0}, {"logprobs", 0}, {"echo", true}});
  ASSERT_EQ(status0, 200) << reply0.dump();
  EXPECT_EQ(reply0["choices"][0]["logprobs"]["token_logprobs"].size(), prompts[0].size());
  EXPECT_EQ(reply0["usage"]["completion_tokens"], 0);
  EXPECT_NEAR(reply0["choices"][0]["logprobs"]["token_logprobs"].back().get<double>(),
              expected[0]["logprobs"].back().get<double>(), 1e-4);
  // Concurrent scoring requests share the model's batches: each reply is what it is alone, its logprobs
  // unmoved by longer batch-mates' padding and its sampled token drawn from its own seed.
  const json sampled = {{"temperature", 1.0}, {"max_tokens", 1}, {"logprobs", 1}, {"seed", 7}, {"echo", true}};
  json alone_body = sampled;
  alone_body["prompt"] = prompts[2];
  const auto [alone_status, alone] = post(client, "/v1/completions", alone_body);
  ASSERT_EQ(alone_status, 200) << alone.dump();
  std::vector<std::thread> clients;
  std::mutex mismatches_mutex;
  std::vector<std::string> mismatches;
  for (int c = 0; c < 8; ++c)
    clients.emplace_back([&, c] {
      httplib::Client mine = client_of(server);
      for (int round = 0; round < 3; ++round) {
        const size_t i = (c + round) % prompts.size();
        json body = sampled;
        body["prompt"] = prompts[i];
        const auto [st, r] = post(mine, "/v1/completions", body);
        std::string wrong;
        if (st != 200) wrong = "status " + std::to_string(st) + ": " + r.dump();
        for (size_t t = 1; wrong.empty() && t < prompts[i].size(); ++t)
          if (std::abs(r["choices"][0]["logprobs"]["token_logprobs"][t].get<double>() -
                       expected[i]["logprobs"][t - 1].get<double>()) > 1e-4)
            wrong = "prompt " + std::to_string(i) + " position " + std::to_string(t);
        if (wrong.empty() && i == 2 && r["choices"][0]["text"] != alone["choices"][0]["text"])
          wrong = "seeded token " + r["choices"][0]["text"].dump() + " alone " + alone["choices"][0]["text"].dump();
        if (!wrong.empty()) {
          std::lock_guard<std::mutex> lock(mismatches_mutex);
          mismatches.push_back(wrong);
        }
      }
    });
  for (auto& t : clients) t.join();
  EXPECT_TRUE(mismatches.empty()) << mismatches.size() << " concurrent replies differ, first: " << mismatches.front();
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(Serve, CompletionsChatStreamsAndStopsAgreeWithZooGenerate) {
  ZOO_SERVE_FIXTURE(dir);
  const std::string model = dir + "/base";
  testing::ServeProcess server("--checkpoint_path " + model);
  ASSERT_GT(server.port(), 0) << server.log();
  httplib::Client client = client_of(server);
  const std::string prompt = "Tell me about cats and rain";

  // Greedy and sampled texts equal zoo generate's for the same settings (eos ignored, as generate goes on past it).
  for (const auto& [temperature, seed] : std::vector<std::pair<double, int>>{{0.0, 0}, {0.9, 5}}) {
    const auto [status, reply] = post(client, "/v1/completions",
                                      json{{"prompt", prompt},
                                           {"max_tokens", 12},
                                           {"temperature", temperature},
                                           {"seed", seed},
                                           {"ignore_eos", true}});
    ASSERT_EQ(status, 200) << reply.dump();
    const std::string expected = generated(model,
                                           "--prompt '" + prompt + "' --max_new_tokens 12 --temperature " +
                                               std::to_string(temperature) + " --seed " + std::to_string(seed),
                                           prompt);
    EXPECT_EQ(reply["choices"][0]["text"], expected) << "temperature " << temperature;
    EXPECT_EQ(reply["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(reply["usage"]["completion_tokens"], 12);
  }
  const auto [status, greedy] =
      post(client, "/v1/completions",
           json{{"prompt", prompt}, {"max_tokens", 20}, {"temperature", 0}, {"ignore_eos", true}});
  ASSERT_EQ(status, 200);
  const std::string text = greedy["choices"][0]["text"];
  ASSERT_GE(text.size(), 8u) << text;

  // Chat: the template applied, the reply ends at eos, as zoo generate --chat.
  const auto [chat_status, chat] =
      post(client, "/v1/chat/completions",
           json{{"messages", {{{"role", "user"}, {"content", prompt}}}}, {"max_tokens", 10}, {"temperature", 0}});
  ASSERT_EQ(chat_status, 200) << chat.dump();
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(chat["choices"][0]["message"]["content"],
            generated(model, "--chat --prompt '" + prompt + "' --max_new_tokens 10 --temperature 0"));

  // A stream's pieces make the whole text; it ends with a finish_reason and [DONE].
  std::string streamed_body;
  const auto res = client.Post(
      "/v1/completions",
      json{{"prompt", prompt}, {"max_tokens", 20}, {"temperature", 0}, {"ignore_eos", true}, {"stream", true}}.dump(),
      "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  const std::vector<std::string> chunks = events(res->body);
  ASSERT_GE(chunks.size(), 3u) << res->body;
  EXPECT_EQ(chunks.back(), "[DONE]");
  std::string joined;
  for (size_t i = 0; i + 1 < chunks.size(); ++i)
    joined += json::parse(chunks[i])["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(joined, text);
  EXPECT_EQ(json::parse(chunks[chunks.size() - 2])["choices"][0]["finish_reason"], "length");

  // Logprobs streamed chunk by chunk are those of the whole reply, text_offset counting on across chunks.
  const json with_logprobs = {
      {"prompt", prompt}, {"max_tokens", 20}, {"temperature", 0}, {"ignore_eos", true}, {"logprobs", 0}};
  const auto [lp_status, whole] = post(client, "/v1/completions", with_logprobs);
  ASSERT_EQ(lp_status, 200) << whole.dump();
  json streamed_offsets = json::array();
  json streamed_logprobs = json::array();
  json streamed_request = with_logprobs;
  streamed_request["stream"] = true;
  const auto lp_res = client.Post("/v1/completions", streamed_request.dump(), "application/json");
  ASSERT_TRUE(lp_res);
  for (const std::string& data : events(lp_res->body)) {
    if (data == "[DONE]") continue;
    const json chunk = json::parse(data);
    const json& lp = chunk["choices"][0]["logprobs"];
    if (lp.is_null()) continue;
    for (const auto& o : lp["text_offset"]) streamed_offsets.push_back(o);
    for (const auto& l : lp["token_logprobs"]) streamed_logprobs.push_back(l);
  }
  EXPECT_EQ(streamed_offsets, whole["choices"][0]["logprobs"]["text_offset"]);
  EXPECT_EQ(streamed_logprobs, whole["choices"][0]["logprobs"]["token_logprobs"]);
  EXPECT_EQ(whole["choices"][0]["logprobs"]["text_offset"][0], prompt.size()) << "counted from the prompt's start";

  // A stop string cuts the text before it (and is not part of it).
  const std::string stop = ascii_piece(text);
  ASSERT_FALSE(stop.empty()) << text;
  const auto [stop_status, stopped] =
      post(client, "/v1/completions",
           json{{"prompt", prompt}, {"max_tokens", 20}, {"temperature", 0}, {"ignore_eos", true}, {"stop", {stop}}});
  ASSERT_EQ(stop_status, 200);
  EXPECT_EQ(stopped["choices"][0]["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(stopped["choices"][0]["finish_reason"], "stop");

  // n choices of a list of prompts: prompt-major order; sampled choices differ, and a seed repeats them.
  const json many = {{"prompt", {prompt, "Rain"}}, {"max_tokens", 8}, {"temperature", 1.0}, {"n", 3}, {"seed", 9}};
  const auto [n_status, first] = post(client, "/v1/completions", many);
  const auto [n_status2, again] = post(client, "/v1/completions", many);
  ASSERT_EQ(n_status, 200) << first.dump();
  ASSERT_EQ(first["choices"].size(), 6u);
  EXPECT_EQ(first["choices"], again["choices"]) << "the same seed gives the same choices";
  std::set<std::string> texts;
  for (int i = 0; i < 3; ++i) texts.insert(first["choices"][i]["text"].get<std::string>());
  EXPECT_GT(texts.size(), 1u) << "three samples at temperature 1 were all the same";

  // The tokenizer endpoints lm-eval's remote tokenizer calls.
  const auto [t_status, tokens] = post(client, "/tokenize", json{{"prompt", prompt}, {"add_special_tokens", false}});
  ASSERT_EQ(t_status, 200);
  const auto [d_status, detok] = post(client, "/detokenize", json{{"tokens", tokens["tokens"]}});
  EXPECT_EQ(detok["prompt"], prompt);
  const auto info = client.Get("/tokenizer_info");
  ASSERT_TRUE(info);
  const json tokenizer = json::parse(info->body);
  EXPECT_EQ(tokenizer["eos_token"], "</s>");
  EXPECT_FALSE(tokenizer["chat_template"].get<std::string>().empty());
  const auto models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], model);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(Serve, OpenAisOwnClientGetsZooGeneratesTexts) {
  ZOO_SERVE_FIXTURE(dir);
  const std::string js = testing::openai_client_dir();
  ZOO_SKIP_WITHOUT_OPENAI_CLIENT(js);
  const std::string model = dir + "/base";
  testing::ServeProcess server("--checkpoint_path " + model);
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string prompt = "Tell me about cats and rain";
  const std::string greedy = generated(model, "--prompt '" + prompt + "' --max_new_tokens 12 --temperature 0", prompt);
  ASSERT_GE(greedy.size(), 6u);
  const std::string stop = ascii_piece(greedy);
  ASSERT_FALSE(stop.empty()) << greedy;
  const auto r =
      testing::run_node_oracle(js, "serve_openai_client.mjs",
                               testing::shell_quoted("http://127.0.0.1:" + std::to_string(server.port()) + "/v1") +
                                   " " + testing::shell_quoted(prompt) + " " + testing::shell_quoted(stop));
  ASSERT_EQ(r.exit_code, 0) << r.output << server.log();
  const json out = json::parse(r.output.substr(r.output.find('{')));
  EXPECT_EQ(out["model"], model);
  EXPECT_EQ(out["completion"], greedy);
  EXPECT_EQ(out["completion_finish"], "length");
  EXPECT_EQ(out["completion_tokens"], 12);
  EXPECT_EQ(out["sampled"],
            generated(model, "--prompt '" + prompt + "' --max_new_tokens 12 --temperature 0.9 --seed 5", prompt));
  const std::string chat = generated(model, "--chat --prompt '" + prompt + "' --max_new_tokens 10 --temperature 0");
  EXPECT_EQ(out["chat"], chat);
  EXPECT_EQ(out["chat_role"], "assistant");
  EXPECT_EQ(out["stream"], greedy) << "streamed pieces join into the same text";
  EXPECT_EQ(out["chat_stream"], chat);
  ASSERT_EQ(out["n"].size(), 3u);
  EXPECT_EQ(out["stopped"], greedy.substr(0, greedy.find(stop)));
  EXPECT_EQ(out["stopped_finish"], "stop");
  EXPECT_EQ(out["bad_request"], "400 max_tokens") << "the client reads zoo's error as an OpenAI error";
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(Serve, BadRequestsAreJsonErrorsAndTheServerLivesOn) {
  ZOO_SERVE_FIXTURE(dir);
  testing::ServeProcess server("--checkpoint_path " + dir + "/base");
  ASSERT_GT(server.port(), 0) << server.log();
  httplib::Client client = client_of(server);
  struct Case {
    std::string path, body;
    int status;
    std::string param;
  };
  const std::vector<Case> cases = {
      {"/v1/completions", "{\"prompt\": ", 400, ""},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": "many"})", 400, "max_tokens"},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 200})", 400, "max_tokens"},  // past 128 positions
      {"/v1/completions", json{{"prompt", std::vector<int>(150, 1)}, {"max_tokens", 0}}.dump(), 400,
       "prompt"},                                                       // > 128
      {"/v1/completions", R"({"prompt": [[1, 600]]})", 400, "prompt"},  // outside the vocabulary
      {"/v1/chat/completions", R"({"messages": [{"role": "user"}], "n": 99})", 400, "n"},
      {"/tokenize", R"({"prompt": 3})", 400, "prompt"},
      {"/detokenize", R"({"tokens": [1, 99999]})", 400, "tokens"},
      {"/v1/nothing", "{}", 404, ""},
  };
  for (const Case& c : cases) {
    const auto [status, reply] = post(client, c.path, c.body);
    EXPECT_EQ(status, c.status) << c.path << " " << c.body.substr(0, 80) << " -> " << reply.dump();
    ASSERT_TRUE(reply.is_object() && reply.contains("error")) << c.body.substr(0, 80);
    EXPECT_EQ(reply["error"]["param"].is_null() ? "" : reply["error"]["param"].get<std::string>(), c.param)
        << reply.dump();
  }
  // Over the body limit: 413, in JSON.
  const auto [big_status, big] = post(client, "/v1/completions", "{\"prompt\": \"" + std::string(9 << 20, 'a') + "\"}");
  EXPECT_EQ(big_status, 413) << big.dump();
  // A client that leaves mid-stream: its job is dropped, the next request is served.
  leave_stream(server, json{{"prompt", "Rain"}, {"max_tokens", 100}, {"stream", true}, {"ignore_eos", true}});
  const auto [after_status, after] = post(client, "/v1/completions", json{{"prompt", "Rain"}, {"max_tokens", 3}});
  EXPECT_EQ(after_status, 200) << after.dump();
  const auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// Resident memory of a process, in bytes (VmRSS).
int64_t resident_bytes(pid_t pid) {
  const std::string status = testing::read_file("/proc/" + std::to_string(pid) + "/status");
  const size_t at = status.find("VmRSS:");
  return at == std::string::npos ? -1 : std::stoll(status.substr(at + 6)) * 1024;
}

// 32 clients at once, 20 requests each: completions, chat, streams some of which the client leaves, and broken
// bodies. Every good request is answered, every bad one is a 4xx JSON error, the server lives on, and a second
// round of the same load leaves its memory where the first left it (glibc keeps freed memory in zoo's heap, so
// "back to idle" is measured as no growth from round to round).
TEST(Serve, ThirtyTwoClientsAtOnce) {
  ZOO_SERVE_FIXTURE(dir);
  testing::ServeProcess server("--checkpoint_path " + dir + "/base");
  ASSERT_GT(server.port(), 0) << server.log();
  std::atomic<int> answered{0}, refused{0}, left{0}, wrong{0};
  std::mutex mutex;
  std::vector<std::string> failures;
  auto client_run = [&](int who) {
    httplib::Client client = client_of(server);
    std::mt19937 rng(who);
    for (int i = 0; i < 20; ++i) {
      const int kind = (who + i) % 5;
      std::string what;
      if (kind == 0) {
        const auto [status, reply] =
            post(client, "/v1/completions",
                 json{{"prompt", "Rain " + std::to_string(i)}, {"max_tokens", 1 + rng() % 6}, {"seed", i}});
        if (status == 200 && reply["choices"].size() == 1) ++answered;
        else what = "completion " + std::to_string(status);
      } else if (kind == 1) {
        const auto [status, reply] =
            post(client, "/v1/chat/completions",
                 json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"max_tokens", 4}, {"n", 2}});
        if (status == 200 && reply["choices"].size() == 2) ++answered;
        else what = "chat " + std::to_string(status) + " " + reply.dump();
      } else if (kind == 2) {
        const auto res = client.Post("/v1/completions",
                                     json{{"prompt", {{1, 5, 9, 11}, {1, 7}}},
                                          {"max_tokens", 1},
                                          {"logprobs", 1},
                                          {"echo", true},
                                          {"temperature", 0}}
                                         .dump(),
                                     "application/json");
        if (res && res->status == 200) ++answered;
        else what = "loglikelihood";
      } else if (kind == 3) {
        // A stream the client leaves after two chunks.
        leave_stream(server, json{{"prompt", "Snow"}, {"max_tokens", 40}, {"stream", true}, {"ignore_eos", true}});
        ++left;
      } else {
        const std::vector<std::string> bad = {"{",
                                              "[]",
                                              R"({"prompt": {"a": 1}})",
                                              R"({"prompt": "x", "n": -3})",
                                              R"({"messages": []})",
                                              std::string(3000, '[')};
        const std::string body = bad[rng() % bad.size()];
        const auto [status, reply] =
            post(client, body.find("messages") != std::string::npos ? "/v1/chat/completions" : "/v1/completions", body);
        if (status >= 400 && status < 500 && reply.contains("error")) ++refused;
        else what = "bad body got " + std::to_string(status) + " " + reply.dump();
      }
      if (!what.empty()) {
        ++wrong;
        std::lock_guard<std::mutex> lock(mutex);
        failures.push_back(what);
      }
    }
  };
  auto round = [&] {
    std::vector<std::thread> clients;
    for (int who = 0; who < 32; ++who) clients.emplace_back(client_run, who);
    for (auto& t : clients) t.join();
  };
  round();
  const int64_t after_first = resident_bytes(server.pid());
  round();
  const int64_t after_second = resident_bytes(server.pid());
  EXPECT_EQ(wrong, 0) << (failures.empty() ? "" : failures.front());
  EXPECT_EQ(answered + refused + left, 2 * 32 * 20);
  EXPECT_GT(refused, 0);
  std::cout << "[ serve ] resident after round 1: " << after_first / (1 << 20)
            << " MiB, after round 2: " << after_second / (1 << 20) << " MiB\n";
  EXPECT_LT(after_second - after_first, int64_t(32) << 20) << "the second round grew the server by more than 32 MiB";
  const auto health = client_of(server).Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

}  // namespace
}  // namespace zoo
