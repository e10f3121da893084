// Fine-tuning data: chat templates rendered as jinja2 (transformers) and @huggingface/jinja render the
// published ones, and `zoo data create-hdf5 Summarization` / `Chat` files
// (read back with h5py) whose loss mask is exactly on the completion /
// assistant tokens, with clear errors for bad input.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "data/text/chat_template.h"
#include "data/text/labeled_tokens.h"
#include "data/text/tokenizer.h"
#include "tests/hdf5_fixtures.h"
#include "tests/test_util.h"
#include "tests/tokenizer_fixtures.h"

namespace zoo {
namespace {

using nlohmann::json;
using testing::TempDir;

json published_templates() {
  return json::parse(testing::read_file(testing::source_dir() + "/tests/data/chat_templates.json"));
}

// Conversations that exercise system prompts, multi-turn, whitespace the
// templates trim or keep, text that looks like Jinja, and role orders some
// templates refuse.
json conversations() {
  auto m = [](const char* role, const std::string& content) { return json{{"role", role}, {"content", content}}; };
  return json::array({
      json::array({m("system", "You are a helpful assistant"), m("user", "Hello"), m("assistant", "Hi there"),
                   m("user", "Who are you"), m("assistant", "   I am an assistant   "), m("user", "Another question")}),
      json::array({m("user", "  padded\ttext \n"), m("assistant", "línea 1\nline 2 {{ not_a_tag }} {% raw %} 😀"),
                   m("user", "东京 \"quoted\" 'single'"), m("assistant", "")}),
      json::array({m("user", "Only a question?")}),
      json::array({m("assistant", "I speak first"), m("user", "then me")}),
      json::array({m("user", "one"), m("user", "two")}),
  });
}

std::vector<text::ChatMessage> messages_of(const json& list) {
  std::vector<text::ChatMessage> out;
  for (const auto& m : list) out.push_back({m["role"].get<std::string>(), m["content"]});
  return out;
}

// Cases of each template x conversation x generation prompt, for a reference renderer.
json template_cases(const json& templates, const json& conversation_list) {
  json cases = json::array();
  for (const auto& [name, t] : templates.items())
    for (const auto& conversation : conversation_list)
      for (bool generation_prompt : {false, true})
        cases.push_back({{"name", name},
                         {"template", t["chat_template"]},
                         {"bos_token", t["bos_token"]},
                         {"eos_token", t["eos_token"]},
                         {"messages", conversation},
                         {"add_generation_prompt", generation_prompt}});
  return cases;
}

// zoo renders each case as `reference` did ({text} or {error}); a template that raises is an error naming it.
// Returns {rendered, refused}.
std::pair<int, int> expect_renderings(const json& cases, const json& reference, const std::string& engine) {
  EXPECT_EQ(reference.size(), cases.size());
  int rendered = 0, refused = 0;
  for (size_t i = 0; i < cases.size() && i < reference.size(); ++i) {
    const auto& c = cases[i];
    text::SpecialTokens tokens;
    tokens.bos_token = c["bos_token"].get<std::string>();
    tokens.eos_token = c["eos_token"].get<std::string>();
    const text::ChatTemplate chat(c["template"].get<std::string>(), tokens, c["name"].get<std::string>());
    const std::string what = c["name"].get<std::string>() + " case " + std::to_string(i) + ": " + c["messages"].dump();
    if (reference[i].contains("text")) {
      EXPECT_EQ(chat.render(messages_of(c["messages"]), c["add_generation_prompt"].get<bool>()),
                reference[i]["text"].get<std::string>())
          << what;
      ++rendered;
    } else {
      try {
        chat.render(messages_of(c["messages"]), c["add_generation_prompt"].get<bool>());
        ADD_FAILURE() << what << ": rendered, but " << engine << " raised " << reference[i]["error"];
      } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find(reference[i]["error"].get<std::string>()), std::string::npos)
            << what << ": " << e.what();
        EXPECT_NE(std::string(e.what()).find(c["name"].get<std::string>()), std::string::npos) << e.what();
      }
      ++refused;
    }
  }
  return {rendered, refused};
}

TEST(ChatTemplate, PublishedTemplatesRenderAsHuggingFaceJinjaRendersThem) {
  const std::string js = testing::transformers_js_dir();
  ZOO_SKIP_WITHOUT_TRANSFORMERS_JS(js);
  const json cases = template_cases(published_templates(), conversations());
  TempDir tmp;
  testing::write_file(tmp / "cases.json", cases.dump());
  const auto r = testing::run_node_oracle(js, "chat_template_jinja.mjs", testing::shell_quoted(tmp / "cases.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto [rendered, refused] = expect_renderings(cases, json::parse(r.output), "@huggingface/jinja");
  EXPECT_GT(rendered, 40);
  EXPECT_GT(refused, 5);  // the templates that insist on alternating roles refuse some conversations
}

// Python's jinja2, as transformers sets it up, is the engine the templates are written for: the templates above
// and those in the published tokenizer_config.json files (Llama 3.x, Qwen2.5, Qwen3, Gemma 3, Mistral Nemo), on
// contents that start or end with spaces and newlines, where @huggingface/jinja's lstrip('\n') strips spaces too.
TEST(ChatTemplate, PublishedTemplatesRenderAsJinja2RendersThem) {
  ZOO_SKIP_WITHOUT_JINJA2();
  const std::string published = testing::published_tokenizers_dir();
  ZOO_SKIP_WITHOUT_PUBLISHED_TOKENIZERS(published);
  json templates = published_templates();
  for (const std::string& name : testing::kPublishedTokenizers) {
    const auto tok = text::make_tokenizer({"HuggingFaceTokenizer", "", "", published + "/" + name});
    const auto& special = tok->special_tokens();
    if (!special.chat_template.empty())
      templates[name] = {
          {"chat_template", special.chat_template}, {"bos_token", special.bos_token}, {"eos_token", special.eos_token}};
  }
  EXPECT_GE(templates.size(), 13u);
  auto m = [](const char* role, const std::string& content) { return json{{"role", role}, {"content", content}}; };
  json spaced = conversations();
  spaced.push_back(json::array({m("system", "\n Be brief. "), m("user", "  two spaces first"),
                                m("assistant", "  <think>\n  mulling\n</think>\n\n  spaced answer \n"),
                                m("user", "\tA tab, then\n\nnewlines\n"), m("assistant", "\n\n  last ")}));
  const json cases = template_cases(templates, spaced);
  TempDir tmp;
  testing::write_file(tmp / "cases.json", cases.dump());
  const auto r = testing::run_command(
      "/usr/bin/python3 " + testing::shell_quoted(testing::source_dir() + "/tests/oracles/chat_template_jinja2.py") +
      " " + testing::shell_quoted(tmp / "cases.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto [rendered, refused] = expect_renderings(cases, json::parse(r.output), "jinja2");
  std::cout << "[ jinja2 ] " << templates.size() << " templates: " << rendered << " renderings equal, " << refused
            << " refused by both\n";
  EXPECT_GT(rendered, 100);
  EXPECT_GT(refused, 5);
}

TEST(ChatTemplate, TemplatesItCannotUseAreClearErrors) {
  text::SpecialTokens tokens;
  auto error = [&](const std::string& source, const std::vector<text::ChatMessage>& messages = {{"user", "hi"}}) {
    try {
      text::ChatTemplate(source, tokens, "dir/tokenizer_config.json").render(messages, true);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("").find("has no chat_template"), std::string::npos) << error("");
  const std::string unclosed = error("{% for m in messages %}{{ m.content }}");
  EXPECT_NE(unclosed.find("dir/tokenizer_config.json: chat_template cannot be parsed"), std::string::npos) << unclosed;
  const std::string filter = error("{{ messages[0].content | no_such_filter }}");
  EXPECT_NE(filter.find("no_such_filter"), std::string::npos) << filter;
  EXPECT_NE(filter.find("a filter or function minja (zoo's Jinja) does not have"), std::string::npos) << filter;
  EXPECT_NE(filter.find("dir/tokenizer_config.json"), std::string::npos) << filter;
  // What jinja2 raises is an error here too, never a crash or a hang: division by zero, templates that loop, recurse,
  // nest or write without end stop at a bound that the message names.
  for (const auto& [source, expected] : std::vector<std::pair<std::string, std::string>>{
           {"{{ 1 // 0 }}", "integer division or modulo by zero"},
           {"{{ 7 % 0 }}", "integer division or modulo by zero"},
           {"{{ 1 / 0 }}", "division by zero"},
           {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
            "template bound reached: nesting deeper than 1000"},
           {"{% for i in range(1000000000) %}{% endfor %}", "Range too big"},
           {"{% for i in range(10, 0, 0) %}{% endfor %}", "range() arg 3 must not be zero"},
           {"{{ 'a' * 100000000 }}", "would pass the output bound"},
           {"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "rendering steps"},
           {"{% set s = namespace(t='ab') %}{% for i in range(100000) %}{% set s.t = s.t ~ s.t %}{% endfor %}",
            "would pass the output bound"},
           {"{% set s = namespace(t='ab') %}{% for i in range(100000) %}{% set s.t = s.t.replace('a', 'aa') %}{% "
            "endfor %}",
            "would pass the output bound"},
           {"{% set s = namespace(l=[1]) %}{% for i in range(100000) %}{% set s.l = s.l + s.l %}{% endfor %}",
            "template bound reached"},
           {"{{ " +
                [] {
                  std::string s;
                  for (int i = 0; i < 100000; ++i) s += "not ";
                  return s;
                }() +
                "x }}",
            "nests deeper than 256"},
           {[] {
              std::string s;
              for (int i = 0; i < 300; ++i) s += "{% if true %}";
              s += "x";
              for (int i = 0; i < 300; ++i) s += "{% endif %}";
              return s;
            }(),
            "nests deeper than 256"},
           {"{{ raise_exception('Conversation roles must alternate') }}", "Conversation roles must alternate"}}) {
    const auto start = std::chrono::steady_clock::now();
    const std::string e = error(source);
    EXPECT_NE(e.find(expected), std::string::npos) << source.substr(0, 80) << ": " << e.substr(0, 400);
    EXPECT_NE(e.find("dir/tokenizer_config.json"), std::string::npos) << e.substr(0, 400);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0)
        << source.substr(0, 80);
  }
  // jinja2's arithmetic: true division, floor division and modulo by the divisor's sign.
  const text::ChatTemplate math("{{ 7 / 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }}", tokens, "math");
  EXPECT_EQ(math.render({{"user", "x"}}, false), "3.5 -4 2 -2");
  // Python's str methods as jinja2 calls them (@huggingface/jinja's lstrip drops every space, Python only the given
  // characters: Qwen3's template writes content.lstrip('\n')).
  const text::ChatTemplate strip(
      "[{{ '\n\n  x '.lstrip('\n') }}][{{ 'ab'.replace('', '-') }}][{{ 'aaa'.replace('a', 'b', 2) }}]", tokens,
      "strip");
  EXPECT_EQ(strip.render({{"user", "x"}}, false), "[  x ][-a-b-][bba]");
}

// Seeded mutations of the published templates (fragments of Jinja inserted, spans cut or repeated): each parses and
// renders, or is refused with an error naming the template; never a crash, and every render ends within its bound.
TEST(ChatTemplate, MutatedTemplatesRenderOrAreRefused) {
  std::mt19937_64 rng(std::getenv("ZOO_FUZZ_SEED") ? std::stoull(std::getenv("ZOO_FUZZ_SEED")) : 59);
  std::vector<std::string> seeds;
  const json templates = published_templates();
  for (const auto& [name, t] : templates.items()) seeds.push_back(t["chat_template"].get<std::string>());
  const std::vector<std::string> fragments = {"{% for i in range(100000) %}",
                                              "{% endfor %}",
                                              "{% if ",
                                              "{% endif %}",
                                              "{{ ",
                                              " }}",
                                              "{% macro m(x) %}{{ m(x) }}{% endmacro %}",
                                              "{{ m(1) }}",
                                              " // 0",
                                              " % 0",
                                              " / 0",
                                              "not not not ",
                                              "(((((",
                                              ")))))",
                                              "[[[[",
                                              "]]]]",
                                              "{% set x = ",
                                              "'a' * 99999999",
                                              "messages[0]['content'] | trim",
                                              "loop.index0",
                                              "raise_exception('stop')",
                                              "strftime_now('%Y')",
                                              "{{ range(10, 0, 0) }}",
                                              "{% raw %}",
                                              "{% endraw %}",
                                              "{# ",
                                              " #}",
                                              "-%}",
                                              "{%-",
                                              "\"",
                                              "'",
                                              "|join",
                                              "|tojson",
                                              "{{ messages | length }}",
                                              "\xff\xfe"};
  const std::vector<text::ChatMessage> conversation = {
      {"system", "s"}, {"user", "hello"}, {"assistant", "hi"}, {"user", "bye"}};
  text::SpecialTokens tokens;
  tokens.bos_token = "<s>";
  tokens.eos_token = "</s>";
  int rendered = 0, refused = 0;
  for (int n = 0; n < 400; ++n) {
    std::string t = seeds[rng() % seeds.size()];
    for (int edits = 1 + static_cast<int>(rng() % 4); edits > 0; --edits) {
      const size_t at = rng() % (t.size() + 1);
      switch (rng() % 3) {
        case 0: t.insert(at, fragments[rng() % fragments.size()]); break;
        case 1: t.erase(at, rng() % 40); break;
        default: t.insert(at, t.substr(at, rng() % 200)); break;
      }
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      const text::ChatTemplate chat(t, tokens, "fuzz_template");
      chat.render(conversation, n % 2 == 0);
      ++rendered;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("fuzz_template"), std::string::npos) << std::string(e.what()).substr(0, 300);
      ++refused;
    }
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0) << "case " << n;
  }
  EXPECT_GT(rendered, 20);
  EXPECT_GT(refused, 20);
}

// transformers gives templates strftime_now (Llama 3.2's dates) and passes content given as a list of parts as is.
TEST(ChatTemplate, StrftimeNowAndContentPartsAsTransformersGivesThem) {
  text::SpecialTokens tokens;
  const text::ChatTemplate dated("Today Date: {{ strftime_now('%d %b %Y') }}", tokens, "llama_3_2");
  char today[64];
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::strftime(today, sizeof today, "%d %b %Y", &local);
  EXPECT_EQ(dated.render({{"user", "x"}}, true), std::string("Today Date: ") + today);
  const text::ChatTemplate parts(
      "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}[{{ p.type "
      "}}:{{ p.text }}]"
      "{% endfor %}{% endif %}{% endfor %}",
      tokens, "parts");
  EXPECT_EQ(parts.render({{"user", json::array({{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}})},
                          {"assistant", "c"}},
                         false),
            "[text:a][text:b]c");
}

// One sample as create-hdf5 writes it from ids and their in-loss flags:
// input_ids, attention_mask (label j in the loss) and labels rows, padded.
std::vector<int32_t> expected_row(const std::vector<int32_t>& ids, const std::vector<int>& in_loss, int msl,
                                  int32_t pad) {
  std::vector<int32_t> row(3 * msl, pad);
  if (static_cast<int>(ids.size()) > msl + 1) {
    ADD_FAILURE() << ids.size() << " ids do not fit a sample of " << msl;
    return row;
  }
  std::fill(row.begin() + msl, row.begin() + 2 * msl, 0);
  for (size_t j = 0; j + 1 < ids.size(); ++j) {
    row[j] = ids[j];
    row[msl + j] = in_loss[j + 1];
    row[2 * msl + j] = ids[j + 1];
  }
  return row;
}

std::string create_hdf5(const std::string& mode, const std::string& in, const std::string& out,
                        const std::string& args) {
  return testing::zoo_binary() + " data create-hdf5 " + mode + " --input_dir " + testing::shell_quoted(in) +
         " --output_dir " + testing::shell_quoted(out) + " " + args;
}

std::vector<std::vector<int32_t>> sentencepiece_encode(const std::string& model,
                                                       const std::vector<std::string>& texts) {
  TempDir tmp;
  testing::write_file(tmp / "texts.json", json(texts).dump());
  const auto r = testing::run_command(
      "/usr/bin/python3 " + testing::shell_quoted(testing::oracle_path("tokenizer_sentencepiece_encode.py")) + " " +
      testing::shell_quoted(model) + " " + testing::shell_quoted(tmp / "texts.json"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return json::parse(r.output)["ids"].get<std::vector<std::vector<int32_t>>>();
}

TEST(CreateHdf5Summarization, LossMaskIsOnTheCompletionAndItsEosOnly) {
  ZOO_SKIP_WITHOUT_H5PY();
  ZOO_SKIP_WITHOUT_SENTENCEPIECE();
  TempDir tmp;
  testing::make_llama_tokenizer(tmp / "tok", "prepend");
  std::filesystem::remove(tmp / "tok/tokenizer.json");  // SentencePiece's own tokenizer.model
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"Summarize: the cat sat on the mat all day.", "A cat sat."},
      {"Translate to Spanish: the rhea", "el ñandú 😀"},
      {std::string(300, 'z') + " far too long a prompt", "dropped, or cut with --truncate"},
      {"Q: 2+2?", " Four"}};
  for (size_t i = 0; i < pairs.size(); ++i)
    testing::write_file(tmp / ("in/" + std::string(i < 2 ? "a" : "b") + ".jsonl"),
                        (i % 2 ? testing::read_file(tmp / ("in/" + std::string(i < 2 ? "a" : "b") + ".jsonl")) : "") +
                            json{{"question", pairs[i].first}, {"answer", pairs[i].second}}.dump() + "\n");
  ASSERT_EQ(testing::run_command("gzip " + (tmp / "in/b.jsonl")).exit_code, 0);
  const std::string common = "--tokenizer_type HuggingFaceTokenizer --huggingface_tokenizer " + (tmp / "tok") +
                             " --prompt_key question --completion_key answer --max_seq_length 48";
  const auto dropped = testing::run_command(create_hdf5("Summarization", tmp / "in", tmp / "out", common));
  ASSERT_EQ(dropped.exit_code, 0) << dropped.output;
  EXPECT_NE(dropped.output.find("0 truncated, 1 dropped"), std::string::npos) << dropped.output;
  const auto truncated =
      testing::run_command(create_hdf5("Summarization", tmp / "in", tmp / "cut", common + " --truncate true"));
  ASSERT_EQ(truncated.exit_code, 0) << truncated.output;
  EXPECT_NE(truncated.output.find("0 truncated, 1 dropped"), std::string::npos) << truncated.output;

  // modelzoo's layout, from the SentencePiece library's ids: bos prompt completion eos.
  std::vector<std::string> texts;
  for (const auto& [p, c] : pairs) texts.insert(texts.end(), {p, c});
  const auto encoded = sentencepiece_encode(tmp / "tok/tokenizer.model", texts);
  std::vector<std::vector<int32_t>> want_dropped, want_cut;
  int64_t loss_tokens = 0;
  for (size_t i = 0; i < pairs.size(); ++i) {
    std::vector<int32_t> ids = {1};
    ids.insert(ids.end(), encoded[2 * i].begin(), encoded[2 * i].end());
    std::vector<int> in_loss(ids.size(), 0);
    ids.insert(ids.end(), encoded[2 * i + 1].begin(), encoded[2 * i + 1].end());
    ids.push_back(2);
    in_loss.resize(ids.size(), 1);
    if (ids.size() <= 49) {
      want_dropped.push_back(expected_row(ids, in_loss, 48, 2));
      loss_tokens += static_cast<int64_t>(encoded[2 * i + 1].size()) + 1;
    }
    ids.resize(std::min<size_t>(ids.size(), 49));
    in_loss.resize(ids.size());
    // The long pair's completion is past the cut: nothing of it is left to learn, so it is dropped either way ...
    if (std::count(in_loss.begin() + 1, in_loss.end(), 1) > 0) want_cut.push_back(expected_row(ids, in_loss, 48, 2));
  }
  EXPECT_EQ(testing::h5py_samples(tmp / "out"), want_dropped);
  const auto params = json::parse(testing::read_file(tmp / "out/data_params.json"));
  EXPECT_EQ(params["post-process"]["n_loss_tokens"], loss_tokens);
  EXPECT_EQ(params["post-process"]["n_dropped"], 1);
  // ... and with a prompt short enough to leave part of the completion, --truncate keeps the sample.
  EXPECT_EQ(testing::h5py_samples(tmp / "cut"), want_dropped);
  testing::write_file(tmp / "in2/c.jsonl",
                      json{{"question", "Q: list"}, {"answer", std::string(200, 'y')}}.dump() + "\n");
  const auto cut =
      testing::run_command(create_hdf5("Summarization", tmp / "in2", tmp / "cut2", common + " --truncate true"));
  ASSERT_EQ(cut.exit_code, 0) << cut.output;
  EXPECT_NE(cut.output.find("1 truncated, 0 dropped"), std::string::npos) << cut.output;
  const auto rows = testing::h5py_samples(tmp / "cut2");
  ASSERT_EQ(rows.size(), 1u);
  const auto q = sentencepiece_encode(tmp / "tok/tokenizer.model", {"Q: list", std::string(200, 'y')});
  std::vector<int32_t> ids = {1};
  ids.insert(ids.end(), q[0].begin(), q[0].end());
  std::vector<int> in_loss(ids.size(), 0);
  ids.insert(ids.end(), q[1].begin(), q[1].end());
  in_loss.resize(ids.size(), 1);
  ids.resize(49);
  in_loss.resize(49);
  EXPECT_EQ(rows[0], expected_row(ids, in_loss, 48, 2));
}

TEST(CreateHdf5Chat, LossMaskIsExactlyOnTheAssistantTurns) {
  ZOO_SKIP_WITHOUT_H5PY();
  ZOO_SKIP_WITHOUT_SENTENCEPIECE();
  const std::string js = testing::transformers_js_dir();
  ZOO_SKIP_WITHOUT_TRANSFORMERS_JS(js);
  const json templates = published_templates();
  auto m = [](const char* role, const std::string& content) { return json{{"role", role}, {"content", content}}; };
  const json plain = json::array({json::array({m("user", "What is two plus two?"), m("assistant", "Four."),
                                               m("user", "And doubled?"), m("assistant", " Eight, with spaces ")}),
                                  json::array({m("user", "Say hola"), m("assistant", "¡Hola! 😀 東京")})});
  json with_system = plain;
  with_system[0].insert(with_system[0].begin(), m("system", "Be brief."));
  for (const auto& [name, layout, system] : {std::tuple{"llama_2_13b_chat", "prepend", true},
                                             {"chatml_openhermes_2_5_mistral_7b", "prepend", true},
                                             {"mistral_7b_instruct_v0_1", "prepend", false},
                                             {"gemma_7b_it", "prepend", false},
                                             {"llama_3_8b_instruct", "metaspace", true}}) {
    SCOPED_TRACE(name);
    TempDir tmp;
    testing::make_llama_tokenizer(tmp / "tok", layout);
    json config = json::parse(testing::read_file(tmp / "tok/tokenizer_config.json"));
    config["chat_template"] = templates[name]["chat_template"];
    testing::write_file(tmp / "tok/tokenizer_config.json", config.dump());
    const json chats = system ? with_system : plain;
    std::string lines;
    for (const auto& c : chats) lines += json{{"messages", c}, {"id", 7}}.dump() + "\n";
    testing::write_file(tmp / "in/chat.jsonl", lines);
    const auto r = testing::run_command(create_hdf5(
        "Chat", tmp / "in", tmp / "out",
        "--tokenizer_type HuggingFaceTokenizer --huggingface_tokenizer " + (tmp / "tok") + " --max_seq_length 512"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    testing::write_file(tmp / "chats.json", chats.dump());
    const auto ref =
        testing::run_node_oracle(js, "chat_tokens_transformers_js.mjs",
                                 testing::shell_quoted(tmp / "tok") + " " + testing::shell_quoted(tmp / "chats.json"));
    ASSERT_EQ(ref.exit_code, 0) << ref.output;
    const json reference = json::parse(ref.output);
    std::vector<std::vector<int32_t>> want;
    for (const auto& c : reference)
      want.push_back(expected_row(c["ids"].get<std::vector<int32_t>>(), c["in_loss"].get<std::vector<int>>(), 512, 2));
    const auto rows = testing::h5py_samples(tmp / "out");
    EXPECT_EQ(rows, want);
    // The labels in the loss spell the assistant's words, and nothing of the
    // user's (the "prepend" layout's decoder turns byte-fallback pieces back into text).
    if (std::string(layout) != "prepend") continue;
    auto tok = text::make_tokenizer({"HuggingFaceTokenizer", "", "", tmp / "tok"});
    for (size_t i = 0; i < rows.size(); ++i) {
      std::vector<int32_t> learned;
      for (int j = 0; j < 512; ++j)
        if (rows[i][512 + j]) learned.push_back(rows[i][1024 + j]);
      const std::string text = tok->decode_like_transformers(learned);
      for (const auto& message : chats[i]) {
        const std::string content = message["content"].get<std::string>();
        const std::string trimmed = content.substr(content.find_first_not_of(' '),
                                                   content.find_last_not_of(' ') - content.find_first_not_of(' ') + 1);
        EXPECT_EQ(text.find(trimmed) != std::string::npos, message["role"] == "assistant") << text << " vs " << content;
      }
    }
  }
}

// The tokenizers and chat templates published for Llama 3.1, 3.2, Qwen2.5, Qwen3, Gemma 3 (content as parts lists)
// and Mistral Nemo: the samples equal transformers.js's, loss marks included (Qwen3's first assistant turn, rendered
// without its empty <think> block inside the conversation, as far as both renderings agree). No content starts with a
// space here:
// @huggingface/jinja's lstrip('\n') strips spaces too, where jinja2 (and zoo) keep them.
TEST(CreateHdf5Chat, PublishedTokenizersAndTemplatesGiveTransformersJsSamples) {
  ZOO_SKIP_WITHOUT_H5PY();
  const std::string published = testing::published_tokenizers_dir();
  ZOO_SKIP_WITHOUT_PUBLISHED_TOKENIZERS(published);
  const std::string js = testing::transformers_js_dir();
  ZOO_SKIP_WITHOUT_TRANSFORMERS_JS(js);
  auto m = [](const char* role, const json& content) { return json{{"role", role}, {"content", content}}; };
  auto parts = [](const std::string& text) { return json::array({{{"type", "text"}, {"text", text}}}); };
  for (const std::string name : {"llama3_1", "llama3_2", "qwen2_5", "qwen3", "gemma3", "mistral_nemo"}) {
    SCOPED_TRACE(name);
    const bool as_parts = name == "gemma3";
    auto content = [&](const std::string& text) { return as_parts ? parts(text) : json(text); };
    const json chats =
        json::array({json::array({m("system", content("Be brief.")), m("user", content("What is two plus two?")),
                                  m("assistant", content("Four.")), m("user", content("And doubled?")),
                                  m("assistant", content("Eight, with spaces "))}),
                     json::array({m("user", content("Say hola, V\u00e1clav")),
                                  m("assistant", content("\u00a1Hola! \U0001F600 \u6771\u4eac"))})});
    TempDir tmp;
    std::string lines;
    for (const auto& chat : chats) lines += json{{"messages", chat}}.dump() + "\n";
    testing::write_file(tmp / "in/chat.jsonl", lines);
    const auto r = testing::run_command(create_hdf5("Chat", tmp / "in", tmp / "out",
                                                    "--tokenizer_type HuggingFaceTokenizer --huggingface_tokenizer " +
                                                        (published + "/" + name) + " --max_seq_length 512 --pad_id 0"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    testing::write_file(tmp / "chats.json", chats.dump());
    const auto ref = testing::run_node_oracle(
        js, "chat_tokens_transformers_js.mjs",
        testing::shell_quoted(published + "/" + name) + " " + testing::shell_quoted(tmp / "chats.json"));
    ASSERT_EQ(ref.exit_code, 0) << ref.output;
    std::vector<std::vector<int32_t>> want;
    for (const auto& c : json::parse(ref.output))
      want.push_back(expected_row(c["ids"].get<std::vector<int32_t>>(), c["in_loss"].get<std::vector<int>>(), 512, 0));
    const auto rows = testing::h5py_samples(tmp / "out");
    if (name != "mistral_nemo") {
      EXPECT_EQ(rows, want);
      continue;
    }
    // Mistral Nemo's template writes the system message only before a final user turn, so the prompt before the
    // first reply is not in the whole: the reference, comparing token prefixes, learns that turn's user words too;
    // zoo learns the replies only. Same ids.
    ASSERT_EQ(rows.size(), want.size());
    auto tok = text::make_tokenizer({"HuggingFaceTokenizer", "", "", published + "/" + name});
    const std::vector<std::string> learned_text = {"Four.</s>Eight, with spaces </s>",
                                                   "\u00a1Hola! \U0001F600 \u6771\u4eac</s>"};
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_TRUE(std::equal(rows[i].begin(), rows[i].begin() + 512, want[i].begin())) << "ids of conversation " << i;
      std::vector<int32_t> learned;
      for (int j = 0; j < 512; ++j) {
        if (rows[i][512 + j]) learned.push_back(rows[i][1024 + j]);
      }
      EXPECT_EQ(tok->decode_like_transformers(learned), learned_text[i]);
    }
  }
}

// Meta-Llama-3-8B-Instruct's first template appends the assistant header even without the generation prompt: zoo
// leaves that trailing header out of the sample, so only the assistant's words and their <|eot_id|> are learned,
// multi-turn conversations included.
TEST(CreateHdf5Chat, ATemplateThatAlwaysAppendsTheAssistantHeaderLearnsOnlyTheTurns) {
  ZOO_SKIP_WITHOUT_H5PY();
  const std::string published = testing::published_tokenizers_dir();
  ZOO_SKIP_WITHOUT_PUBLISHED_TOKENIZERS(published);
  auto tok = text::make_tokenizer({"HuggingFaceTokenizer", "", "", published + "/llama3"});
  const text::ChatTemplate chat(tok->special_tokens().chat_template, tok->special_tokens(), "llama3");
  EXPECT_EQ(chat.unconditional_generation_prompt(), "<|start_header_id|>assistant<|end_header_id|>\n\n");
  const std::vector<text::ChatMessage> conversation = {
      {"user", "What is two plus two?"}, {"assistant", "Four."}, {"user", "And doubled?"}, {"assistant", " Eight "}};
  const text::LabeledTokens t = text::chat_tokens(*tok, chat, conversation);
  std::vector<int32_t> learned;
  for (size_t i = 0; i < t.ids.size(); ++i)
    if (t.in_loss[i]) learned.push_back(t.ids[i]);
  EXPECT_EQ(tok->decode(learned), "Four.<|eot_id|>Eight<|eot_id|>");
  EXPECT_EQ(tok->decode({t.ids.back()}), "<|eot_id|>") << "the trailing header is not part of the sample";
}

// One conversation of 100,000 messages renders once and marks only the turns that fit the sample.
TEST(CreateHdf5Chat, AVeryLongConversationIsPreparedInSeconds) {
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir tmp;
  json messages = json::array();
  for (int i = 0; i < 100000; ++i)
    messages.push_back(
        {{"role", i % 2 ? "assistant" : "user"}, {"content", i % 2 ? "answer " + std::to_string(i) : "question"}});
  testing::write_file(tmp / "in/chat.jsonl", json{{"messages", messages}}.dump() + "\n");
  testing::write_file(tmp / "template.jinja",
                      published_templates()["chatml_openhermes_2_5_mistral_7b"]["chat_template"].get<std::string>());
  const auto start = std::chrono::steady_clock::now();
  const auto r = testing::run_command(
      create_hdf5("Chat", tmp / "in", tmp / "out",
                  "--tokenizer_type ByteTokenizer --eos_id 0 --max_seq_length 256 --truncate true --chat_template " +
                      (tmp / "template.jinja")));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 truncated"), std::string::npos) << r.output;
  EXPECT_LT(seconds, 60.0) << "one rendering and a few short ones, not one per turn";
  std::cout << "[ chat ] 100,000-message conversation prepared in " << seconds << " s\n";
}

TEST(CreateHdf5FineTuning, BadInputIsAClearErrorNamingTheFileAndLine) {
  TempDir tmp;
  testing::write_file(tmp / "template.jinja",
                      "{% for m in messages %}<{{ m.role }}>{{ m.content }}</{{ m.role }}>{% endfor %}"
                      "{% if add_generation_prompt %}<assistant>{% endif %}");
  auto run = [&](const std::string& mode, const std::string& lines, const std::string& extra = "") {
    static int n = 0;
    const std::string in = tmp / ("in" + std::to_string(++n));
    testing::write_file(in + "/data.jsonl", lines);
    const std::string out = tmp / ("out" + std::to_string(n));
    const auto r =
        testing::run_command(create_hdf5(mode, in, out, "--tokenizer_type ByteTokenizer --eos_id 0 " + extra));
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_FALSE(std::filesystem::exists(out + "/examples_0.h5")) << "a failed run leaves no samples behind";
    return in + "/data.jsonl: " + r.output;
  };
  auto expect_error = [](const std::string& output, const std::string& where, const std::string& what) {
    const std::string path = output.substr(0, output.find(": "));
    EXPECT_NE(output.find(path + ":" + where), std::string::npos) << output;
    EXPECT_NE(output.find(what), std::string::npos) << output;
  };
  const std::string good = json{{"prompt", "p"}, {"completion", "c"}}.dump() + "\n";
  expect_error(run("Summarization", good + "{\"prompt\": \"p\", \n"), "2", "not a JSON object");
  expect_error(run("Summarization", good + json{{"question", "p"}, {"completion", "c"}}.dump()), "2",
               "no key 'prompt' (set --prompt_key");
  expect_error(run("Summarization", good + good + json{{"prompt", "p"}, {"completion", " "}}.dump()), "3",
               "the completion is empty");
  expect_error(run("Summarization", good, "--sep_token '<sep>'"), "", "--sep_token <sep> is not a token");
  const std::string chat = " --chat_template " + (tmp / "template.jinja");
  auto conversation = [](const char* role) {
    return json{{"messages", json::array({{{"role", "user"}, {"content", "hi"}}, {{"role", role}, {"content", "x"}}})}}
               .dump() +
           "\n";
  };
  expect_error(run("Chat", conversation("assistant") + conversation("robot"), chat), "2",
               "message 1: unknown role 'robot' (expected system, user or assistant)");
  expect_error(run("Chat", conversation("user"), chat), "1", "no assistant message");
  expect_error(run("Chat", json{{"conversation", json::array()}}.dump() + "\n", chat), "1",
               "expected a list of messages under 'messages' (set --multi_turn_key)");
  expect_error(run("Chat", json{{"messages", json::array({{{"role", "user"}}})}}.dump() + "\n", chat), "1",
               "messages[0]: no key 'content' (set --multi_turn_content_key");
  expect_error(run("Chat", conversation("assistant")), "", "has no chat_template");
  // Inputs by their name that cannot be read are errors, not files quietly left out of "1/1 files".
  for (const auto& [make, what] : std::vector<std::pair<std::function<void(const std::string&)>, std::string>>{
           {[](const std::string& p) { std::filesystem::create_symlink(p + ".gone", p); },
            "a symbolic link to nothing"},
           {[](const std::string& p) { ASSERT_EQ(mkfifo(p.c_str(), 0600), 0); }, "a FIFO"},
           {[](const std::string& p) { std::filesystem::create_directories(p); }, "a directory"}}) {
    static int k = 0;
    const std::string in = tmp / ("odd" + std::to_string(++k));
    testing::write_file(in + "/good.jsonl", good);
    make(in + "/odd.jsonl");
    const auto r = testing::run_command(create_hdf5("Summarization", in, tmp / ("odd_out" + std::to_string(k)),
                                                    "--tokenizer_type ByteTokenizer --eos_id 0"));
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(in + "/odd.jsonl is " + what), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace zoo
