// tokenizer.json, component by component, against Hugging Face's tokenizers
// library itself (Rust, through its npm binding): each normalizer,
// pre-tokenizer (every Split behavior), model and decoder in a small
// synthetic file, on texts that tell them apart (NFC/NFD-different text,
// whitespace runs, punctuation, digits, CJK, emoji, added tokens). Then the
// files published for Llama 2, 3, 3.1, Qwen3 and Gemma 3 against the library
// and transformers.js, and the errors for what zoo does not apply.
#include <chrono>
#include <nlohmann/json.hpp>
#include <random>

#include "data/text/hf_pipeline.h"
#include "data/text/hf_tokenizer.h"
#include "data/text/tokenizer.h"
#include "tests/test_util.h"
#include "tests/text_samples.h"
#include "tests/tokenizer_fixtures.h"

namespace zoo {
namespace {

using json = nlohmann::json;
using testing::TempDir;

std::vector<std::string> corpus() {
  std::vector<std::string> texts = testing::fixed_texts();
  for (const char* t : {"caf\xC3\xA9 vs cafe\xCC\x81 (NFC / NFD)",
                        "\xEF\xBC\xA1\xEF\xBD\x8D\xEF\xBD\x8F \xE2\x91\xA0\xE2\x91\xA1 \xEF\xAC\x81 ligature",
                        "I\xCC\x87stanbul \xC3\x9F \xC7\x85 \xC3\x85ngstr\xC3\xB6m",
                        "a\xC2\xA0"
                        "b\xE2\x80\x83"
                        "c\xE3\x80\x80"
                        "d",
                        "e\xCC\x81\xCC\x81\xCC\x81",
                        "a-b--c---d-",
                        "--lead and trail--",
                        "x1y22z333 4444",
                        "hi!!! what?? ok...",
                        "the the the theta",
                        "  ",
                        "\xE6\x9D\xB1\xE4\xBA\xAC\xE3\x81\xAF\xE5\xA4\xA7\xE3\x81\x8D\xE3\x81\x84",
                        "<x> at start",
                        "mid <x>dle <X> <x>",
                        "word<x>word <y>  <y>",
                        "<y>",
                        "ab <z> cd",
                        "THE Cat",
                        "\xE2\x96\x81"
                        "already \xE2\x96\x81marked",
                        "tab\tsep\tvalues\n"})
    texts.push_back(t);
  std::mt19937 rng(11);
  for (int i = 0; i < 60; ++i) texts.push_back(testing::random_text(rng, 1 + static_cast<int>(rng() % 40)));
  return texts;
}

// A character-level BPE over the corpus's alphabet with byte fallback, and merges among a few symbols, so that where
// a pre-tokenizer cuts changes the ids.
json char_bpe(const std::string& space = "\xE2\x96\x81") {
  json vocab = {{"<unk>", 0}};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    vocab[buf] = static_cast<int>(vocab.size());
  }
  auto add = [&](const std::string& t) {
    if (!vocab.contains(t)) vocab[t] = static_cast<int>(vocab.size());
  };
  for (char c = 32; c < 127; ++c) add(std::string(1, c));
  for (const char* t : {"\xE2\x96\x81", "\xC3\xA9", "\xCC\x81", "\xC3\x9F", "\xE6\x9D\xB1", "\xE4\xBA\xAC", "\n", "\t"})
    add(t);
  const std::vector<std::string> symbols = {"t", "h", "e", "a", "-", "1", "2", "!", ".", "x", " ", space, "<", ">"};
  json merges = json::array();
  for (const auto& a : symbols)
    for (const auto& b : symbols) {
      add(a + b);
      merges.push_back({a, b});
    }
  for (const auto& [a, b] :
       std::vector<std::pair<std::string, std::string>>{{"th", "e"}, {space + "t", "he"}, {"--", "-"}, {"<x", ">"}}) {
    add(a + b);
    merges.push_back({a, b});
  }
  return {{"type", "BPE"},         {"vocab", vocab},       {"merges", merges},
          {"byte_fallback", true}, {"unk_token", "<unk>"}, {"fuse_unk", true}};
}

// A byte-level BPE: the 256 byte characters and merges among the commonest.
json byte_level_bpe(bool ignore_merges) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[text::hf::byte_level_char(static_cast<unsigned char>(b))] = b;
  json merges = json::array();
  const std::vector<std::string> symbols = {"\xC4\xA0", "t", "h", "e", "a", "o", "n", "1", "2", "\xC3\xA3", "\xC2\xA9"};
  for (const auto& a : symbols)
    for (const auto& b : symbols) {
      if (!vocab.contains(a + b)) vocab[a + b] = static_cast<int>(vocab.size());
      merges.push_back({a, b});
    }
  vocab["thecat"] = static_cast<int>(vocab.size());  // whole-word entry that no merge reaches: ignore_merges takes it
  return {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}, {"ignore_merges", ignore_merges}};
}

// added_tokens entries with every field the library's schema requires.
struct Added {
  int id;
  const char* content;
  bool special, normalized, lstrip, rstrip, single_word;
};
json added(const std::vector<Added>& tokens) {
  json list = json::array();
  for (const auto& t : tokens)
    list.push_back({{"id", t.id},
                    {"content", t.content},
                    {"special", t.special},
                    {"normalized", t.normalized},
                    {"lstrip", t.lstrip},
                    {"rstrip", t.rstrip},
                    {"single_word", t.single_word}});
  return list;
}

const json kByteLevelDecoder = {
    {"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};

json split(const json& pattern, const char* behavior, bool invert) {
  return {{"type", "Split"}, {"pattern", pattern}, {"behavior", behavior}, {"invert", invert}};
}

const json kSpDecoder = {{"type", "Sequence"},
                         {"decoders",
                          {{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
                           {{"type", "ByteFallback"}},
                           {{"type", "Fuse"}}}}};

// name -> tokenizer.json: one case per component and option.
std::vector<std::pair<std::string, json>> component_cases() {
  std::vector<std::pair<std::string, json>> cases;
  auto with = [&](const std::string& name, json normalizer, json pre, json model, json decoder,
                  json added = json::array()) {
    cases.emplace_back(name, json{{"version", "1.0"},
                                  {"added_tokens", added},
                                  {"normalizer", normalizer},
                                  {"pre_tokenizer", pre},
                                  {"post_processor", nullptr},
                                  {"decoder", decoder},
                                  {"model", model}});
  };
  const json none;
  const json metaspace = {
      {"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", "always"}, {"split", true}};
  // Normalizers (before a Metaspace, as SentencePiece-style files have them).
  for (const char* form : {"NFC", "NFD", "NFKC", "NFKD", "Lowercase", "StripAccents"})
    with(std::string("normalizer ") + form, {{"type", form}}, metaspace, char_bpe(), kSpDecoder);
  with(
      "normalizer NFD+StripAccents+Lowercase",
      {{"type", "Sequence"}, {"normalizers", {{{"type", "NFD"}}, {{"type", "StripAccents"}}, {{"type", "Lowercase"}}}}},
      metaspace, char_bpe(), kSpDecoder);
  with("normalizer Strip", {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}, metaspace, char_bpe(),
       kSpDecoder);
  with("normalizer Strip right", {{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}}, metaspace,
       char_bpe(), kSpDecoder);
  with("normalizer Replace regex", {{"type", "Replace"}, {"pattern", {{"Regex", "\\s+"}}}, {"content", " "}}, metaspace,
       char_bpe(), kSpDecoder);
  with("normalizer Prepend+Replace (Llama 2)",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}},
       none, char_bpe(), kSpDecoder);
  with("normalizer BertNormalizer",
       {{"type", "BertNormalizer"},
        {"clean_text", true},
        {"handle_chinese_chars", true},
        {"strip_accents", nullptr},
        {"lowercase", true}},
       metaspace, char_bpe(), kSpDecoder);
  with("normalizer BertNormalizer cased",
       {{"type", "BertNormalizer"},
        {"clean_text", true},
        {"lowercase", false},
        {"strip_accents", true},
        {"handle_chinese_chars", false}},
       metaspace, char_bpe(), kSpDecoder);
  // Pre-tokenizers: Split with each behavior, inverted or not, on a string and on a regex.
  for (const char* behavior : {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"})
    for (bool invert : {false, true}) {
      with(std::string("Split string ") + behavior + (invert ? " inverted" : ""), none,
           split({{"String", "-"}}, behavior, invert), char_bpe(), kSpDecoder);
      with(std::string("Split regex ") + behavior + (invert ? " inverted" : ""), none,
           split({{"Regex", "\\d+|\\s"}}, behavior, invert), char_bpe(), kSpDecoder);
    }
  for (const char* scheme : {"always", "first", "never"})
    for (bool split_words : {true, false})
      with(std::string("Metaspace ") + scheme + (split_words ? "" : " unsplit"), none,
           {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", scheme}, {"split", split_words}},
           char_bpe(),
           {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}, {"prepend_scheme", scheme}, {"split", split_words}},
           added({{559, "<x>", true, false, false, false, false}}));
  for (const char* type : {"Whitespace", "WhitespaceSplit", "BertPreTokenizer"})
    with(std::string("pre ") + type, none, {{"type", type}}, char_bpe(), kSpDecoder);
  for (const char* behavior : {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"})
    with(std::string("Punctuation ") + behavior, none, {{"type", "Punctuation"}, {"behavior", behavior}}, char_bpe(),
         kSpDecoder);
  for (bool individual : {true, false})
    with(std::string("Digits") + (individual ? " individual" : ""), none,
         {{"type", "Digits"}, {"individual_digits", individual}}, char_bpe(), kSpDecoder);
  with("CharDelimiterSplit", none, {{"type", "CharDelimiterSplit"}, {"delimiter", "a"}}, char_bpe(), kSpDecoder);
  with("pre Sequence", none,
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "WhitespaceSplit"}}, {{"type", "Digits"}, {"individual_digits", true}}, metaspace}}},
       char_bpe(), kSpDecoder);
  // Byte level: GPT-2's regex or a Split before it (Llama 3), prefix space, ignore_merges.
  for (bool prefix : {false, true})
    for (bool use_regex : {true, false})
      with(std::string("ByteLevel") + (prefix ? " prefix" : "") + (use_regex ? "" : " no-regex"), none,
           {{"type", "ByteLevel"}, {"add_prefix_space", prefix}, {"trim_offsets", true}, {"use_regex", use_regex}},
           byte_level_bpe(false), kByteLevelDecoder, added({{378, "<x>", true, false, false, false, false}}));
  for (bool ignore : {false, true})
    with(std::string("Split+ByteLevel") + (ignore ? " ignore_merges" : ""), {{"type", "NFC"}},
         {{"type", "Sequence"},
          {"pretokenizers",
           {split({{"Regex",
                    "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s+(?!\\S)|\\s+"}},
                  "Isolated", false),
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}},
         byte_level_bpe(ignore), kByteLevelDecoder);
  // Models.
  json suffixed = {{"type", "BPE"},
                   {"unk_token", "<unk>"},
                   {"continuing_subword_prefix", "##"},
                   {"end_of_word_suffix", "</w>"},
                   {"vocab", {{"<unk>", 0}}},
                   {"merges", json::array()}};
  for (char ch = 33; ch < 127; ++ch)
    for (const std::string& form : {std::string(1, ch), "##" + std::string(1, ch), std::string(1, ch) + "</w>",
                                    "##" + std::string(1, ch) + "</w>"})
      suffixed["vocab"][form] = static_cast<int>(suffixed["vocab"].size());
  for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{
           {"t", "##h"}, {"th", "##e</w>"}, {"th", "##e"}, {"##h", "##e</w>"}, {"a", "##a"}}) {
    suffixed["vocab"][a + b.substr(2)] = static_cast<int>(suffixed["vocab"].size());
    suffixed["merges"].push_back({a, b});
  }
  with("BPE prefix+suffix, unk", none, {{"type", "WhitespaceSplit"}}, suffixed,
       {{"type", "BPEDecoder"}, {"suffix", "</w>"}});
  json unfused = char_bpe();
  unfused["byte_fallback"] = false;
  unfused["fuse_unk"] = false;
  with("BPE unk unfused", none, metaspace, unfused, kSpDecoder);
  unfused["fuse_unk"] = true;
  with("BPE unk fused", none, metaspace, unfused, kSpDecoder);
  json wp_vocab = {{"[UNK]", 0}, {"[CLS]", 1}, {"[SEP]", 2}};
  for (const char* t :
       {"the", "quick", "brown", "fox", "##s", "##ing", "un",  "##aff", "##able", "hello", "world", "it", "'",
        ",",   ".",     "!",     "?",   "-",   "a",     "##a", "##b",   "b",      "c",     "##c",   "d",  "x",
        "##1", "1",     "2",     "3",   "4",   "##2",   "##3", "##4",   "t",      "##h",   "##e"})
    wp_vocab[t] = static_cast<int>(wp_vocab.size());
  for (bool cleanup : {true, false})
    with(std::string("WordPiece") + (cleanup ? " cleanup" : ""),
         {{"type", "BertNormalizer"},
          {"clean_text", true},
          {"handle_chinese_chars", true},
          {"strip_accents", nullptr},
          {"lowercase", true}},
         {{"type", "BertPreTokenizer"}},
         {{"type", "WordPiece"},
          {"vocab", wp_vocab},
          {"unk_token", "[UNK]"},
          {"continuing_subword_prefix", "##"},
          {"max_input_chars_per_word", 12}},
         {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", cleanup}});
  with("WordLevel", {{"type", "Lowercase"}}, {{"type", "Whitespace"}},
       {{"type", "WordLevel"}, {"vocab", wp_vocab}, {"unk_token", "[UNK]"}},
       {{"type", "CTC"}, {"pad_token", "[CLS]"}, {"word_delimiter_token", "-"}, {"cleanup", true}});
  json unigram_vocab = json::array({{"<unk>", 0.0}});
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    unigram_vocab.push_back({buf, -20.0});
  }
  std::mt19937 rng(3);
  for (const char* t : {"\xE2\x96\x81",
                        "\xE2\x96\x81the",
                        "\xE2\x96\x81t",
                        "he",
                        "h",
                        "e",
                        "t",
                        "a",
                        "b",
                        "c",
                        "d",
                        "ab",
                        "abc",
                        "bc",
                        "cd",
                        "\xE2\x96\x81"
                        "a",
                        "x",
                        "1",
                        "2",
                        "12",
                        "-",
                        "--",
                        "o",
                        "l",
                        "lo",
                        "hel",
                        "llo",
                        "\xE2\x96\x81hello",
                        "w",
                        "or",
                        "ld",
                        "r",
                        "d."})
    unigram_vocab.push_back({t, -1.0 - static_cast<double>(rng() % 800) / 100.0});
  for (bool fallback : {false, true})
    with(std::string("Unigram") + (fallback ? " byte_fallback" : ""), none, metaspace,
         {{"type", "Unigram"}, {"unk_id", 0}, {"vocab", unigram_vocab}, {"byte_fallback", fallback}}, kSpDecoder);
  with("decoder Strip", none, metaspace, char_bpe(),
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", "\xE2\x96\x81"}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 1}}}}});
  // Added tokens: raw and normalized, lstrip, rstrip, single_word, under a normalizer that changes them.
  with("added tokens", {{"type", "Lowercase"}}, metaspace, char_bpe(), kSpDecoder,
       added({{559, "<x>", true, false, true, false, false},
              {560, "<y>", false, true, false, true, false},
              {561, "<X>", false, true, false, false, false},
              {562, "word", false, false, false, false, true},
              {563, "<z>", true, false, true, true, false}}));
  return cases;
}

TEST(TokenizerPipeline, EveryComponentMatchesTheTokenizersLibrary) {
  const std::string rust = testing::rust_tokenizers_dir();
  ZOO_SKIP_WITHOUT_RUST_TOKENIZERS(rust);
  // The added tokens' ids in the cases: the model's for "<x>", the next ones after the vocabulary for the others.
  ASSERT_EQ(char_bpe()["vocab"]["<x>"], 559);
  ASSERT_EQ(char_bpe()["vocab"].size(), 560u);
  ASSERT_EQ(byte_level_bpe(false)["vocab"].size(), 378u);
  TempDir tmp;
  const auto texts = corpus();
  testing::write_file(tmp / "texts.json", json(texts).dump());
  const auto cases = component_cases();
  std::string files;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto file = tmp / ("case" + std::to_string(i) + ".json");
    testing::write_file(file, cases[i].second.dump());
    files += " " + testing::shell_quoted(file);
  }
  const auto r =
      testing::run_node_oracle(rust, "tokenizer_rust.mjs", testing::shell_quoted(tmp / "texts.json") + files);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json reference = json::parse(r.output);
  for (size_t c = 0; c < cases.size(); ++c) {
    const std::string file = tmp / ("case" + std::to_string(c) + ".json");
    const json& ref = reference[file];
    if (ref.contains("error")) {
      ADD_FAILURE() << cases[c].first << ": the library refused the case: " << ref["error"];
      continue;
    }
    text::PipelineTokenizer tok(cases[c].second, file);
    int differ = 0;
    for (size_t i = 0; i < texts.size() && differ < 3; ++i) {
      const auto ids = tok.encode(texts[i]);
      const auto expected = ref["plain"][i].get<std::vector<int32_t>>();
      EXPECT_EQ(ids, expected) << cases[c].first << ", text " << i << ": '" << texts[i] << "'";
      if (ids == expected)
        EXPECT_EQ(tok.decode(expected), ref["decoded"][i].get<std::string>())
            << cases[c].first << ", text " << i << ": '" << texts[i] << "'";
      differ += ids != expected;
    }
  }
}

// Real files: ids with and without special tokens and decoded text against both references.
TEST(TokenizerPipeline, PublishedTokenizersMatchTheLibraryAndTransformersJs) {
  const std::string published = testing::published_tokenizers_dir();
  ZOO_SKIP_WITHOUT_PUBLISHED_TOKENIZERS(published);
  const std::string rust = testing::rust_tokenizers_dir();
  ZOO_SKIP_WITHOUT_RUST_TOKENIZERS(rust);
  const std::string js = testing::transformers_js_dir();
  ZOO_SKIP_WITHOUT_TRANSFORMERS_JS(js);
  TempDir tmp;
  auto texts = corpus();
  for (const char* t :
       {"Thanks to V\xC3\xA1"
        "clav Slav\xC3\xADk.",
        "<|begin_of_text|>Hi<|eot_id|>", "<|im_start|>user\nhi<|im_end|>", "<start_of_turn>user\nhey<end_of_turn>",
        "<s>[INST] hi [/INST]</s>", "    def f(x):\n        return x**2\n", "<unused5> <tool_call>{}</tool_call>",
        "\xD5\xA1\xCC\x81 \xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8 (a Hangul syllable, NFD)"})
    texts.push_back(t);
  testing::write_file(tmp / "texts.json", json(texts).dump());
  const std::vector<std::string>& names = testing::kPublishedTokenizers;
  std::string files;
  for (const auto& n : names) files += " " + testing::shell_quoted(published + "/" + n + "/tokenizer.json");
  const auto r =
      testing::run_node_oracle(rust, "tokenizer_rust.mjs", testing::shell_quoted(tmp / "texts.json") + files);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json rust_ref = json::parse(r.output);
  for (const auto& n : names) {
    const std::string dir = published + "/" + n;
    const auto js_run =
        testing::run_node_oracle(js, "tokenizer_transformers_js.mjs",
                                 testing::shell_quoted(dir) + " " + testing::shell_quoted(tmp / "texts.json"));
    ASSERT_EQ(js_run.exit_code, 0) << js_run.output;
    const json js_ref = json::parse(js_run.output);
    const json& ref = rust_ref[dir + "/tokenizer.json"];
    auto tok = text::make_tokenizer({"HuggingFaceTokenizer", "", "", dir});
    for (size_t i = 0; i < texts.size(); ++i) {
      const auto ids = tok->encode(texts[i]);
      EXPECT_EQ(ids, ref["plain"][i].get<std::vector<int32_t>>()) << n << " text " << i << ": '" << texts[i] << "'";
      EXPECT_EQ(ids, js_ref["plain"][i].get<std::vector<int32_t>>()) << n << " (transformers.js) text " << i;
      EXPECT_EQ(tok->encode_with_special_tokens(texts[i]), js_ref["special"][i].get<std::vector<int32_t>>())
          << n << " text " << i;
      EXPECT_EQ(tok->decode(ids), ref["decoded"][i].get<std::string>()) << n << " text " << i;
      EXPECT_EQ(tok->decode_like_transformers(ids), js_ref["decoded"][i].get<std::string>()) << n << " text " << i;
    }
  }
  // The issue's example: a word in Llama 3's vocabulary is taken whole (ignore_merges).
  auto llama3 = text::make_tokenizer({"HuggingFaceTokenizer", "", "", published + "/llama3"});
  EXPECT_EQ(llama3->encode("Thanks to V\xC3\xA1"
                           "clav Slav\xC3\xADk."),
            (std::vector<int32_t>{12947, 311, 123677, 120859, 111086, 13}));
}

// Long inputs: a line of megabytes tokenizes in linear time, and a normalizer that multiplies the text stops with
// an error naming the step instead of filling memory.
TEST(TokenizerPipeline, LongInputsAreLinearAndGrowthIsBounded) {
  json j{{"normalizer",
          {{"type", "Sequence"},
           {"normalizers",
            {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
             {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}}},
         {"model", char_bpe()},
         {"decoder", kSpDecoder}};
  text::PipelineTokenizer tok(j, "sp.json");
  std::string line;
  while (line.size() < 20'000'000) line += "the theta hat-tea 12! ";
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tok.encode(line);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 60.0) << "a 20 MB line should take seconds";
  EXPECT_EQ(tok.decode(ids), " " + line);

  json grow{{"normalizer", {{"type", "Sequence"}, {"normalizers", json::array()}}}, {"model", char_bpe()}};
  for (int i = 0; i < 12; ++i)
    grow["normalizer"]["normalizers"].push_back(
        {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", "aaaa"}});
  text::PipelineTokenizer multiplied(grow, "grow.json");
  try {
    multiplied.encode(std::string(1000, 'a'));
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("grow.json: normalizer.normalizers[2]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("grew past 16 times"), std::string::npos) << e.what();
  }
}

std::string load_error(const json& j) {
  try {
    text::PipelineTokenizer tok(j, "t.json");
    tok.encode("some text aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!");
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

TEST(TokenizerPipeline, WhatZooCannotApplyIsAnErrorNamingTheComponent) {
  const json model = char_bpe();
  EXPECT_NE(load_error({{"normalizer", {{"type", "Precompiled"}}}, {"model", model}})
                .find("t.json: normalizer: zoo does not apply the normalizer type \"Precompiled\""),
            std::string::npos);
  EXPECT_NE(
      load_error({{"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", {{{"type", "UnicodeScripts"}}}}}},
                  {"model", model}})
          .find("t.json: pre_tokenizer.pretokenizers[0]: zoo does not apply the pre-tokenizer type \"UnicodeScripts\""),
      std::string::npos);
  EXPECT_NE(
      load_error({{"model", {{"type", "Mystery"}}}}).find("model.type: zoo does not apply the model type \"Mystery\""),
      std::string::npos);
  EXPECT_NE(load_error({{"decoder", {{"type", "Nope"}}}, {"model", model}})
                .find("t.json: decoder: zoo does not apply the decoder type \"Nope\""),
            std::string::npos);
  json bad_regex = {{"pre_tokenizer", split({{"Regex", "(unclosed"}}, "Isolated", false)}, {"model", model}};
  EXPECT_NE(load_error(bad_regex).find("t.json: pre_tokenizer.pattern: regex '(unclosed'"), std::string::npos)
      << load_error(bad_regex);
  json bad_behavior = {{"pre_tokenizer", split({{"String", "-"}}, "Sideways", false)}, {"model", model}};
  EXPECT_NE(load_error(bad_behavior).find("pre_tokenizer.behavior: expected Removed, Isolated"), std::string::npos);
  for (const json& id : {json(-1), json(4294967296LL), json("7")}) {
    json j = {{"model", model}, {"added_tokens", {{{"id", id}, {"content", "<t>"}, {"special", true}}}}};
    EXPECT_NE(load_error(j).find("t.json: added_tokens[0].id: expected an"), std::string::npos)
        << id << ": " << load_error(j);
  }
  json merge_out = model;
  merge_out["merges"].push_back({"t", "q"});
  EXPECT_NE(load_error({{"model", merge_out}}).find("makes \"tq\", which is not in the vocabulary"), std::string::npos);
}

// A catastrophic regex on a long text stops at PCRE2's bound with an error naming the file and the pattern.
TEST(TokenizerPipeline, BacktrackingPatternStopsWithANamedError) {
  const json j = {{"pre_tokenizer", split({{"Regex", "(a|a)+$"}}, "Isolated", false)}, {"model", char_bpe()}};
  text::PipelineTokenizer tok(j, "redos.json");
  try {
    tok.encode(std::string(5000, 'a') + "!");
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("redos.json: pre_tokenizer: regex '(a|a)+$'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("limit"), std::string::npos) << e.what();
  }
}

// Seeded mutations of tokenizer.json files (values of other types and sizes, ids out of range, components swapped,
// patterns that backtrack, deep nesting): each loads and tokenizes, or is refused with an error; never a crash or a
// hang.
TEST(TokenizerPipeline, MutatedTokenizerJsonFilesLoadOrAreRefused) {
  std::mt19937_64 rng(std::getenv("ZOO_FUZZ_SEED") ? std::stoull(std::getenv("ZOO_FUZZ_SEED")) : 59);
  const auto cases = component_cases();
  const std::vector<json> replacements = {
      nullptr,
      -1,
      4294967296LL,
      2147483647,
      0,
      1,
      3,
      1.5,
      std::nan(""),
      true,
      false,
      "",
      " ",
      "\xff\xfe",
      "\xE2\x96\x81",
      std::string(70000, 'x'),
      "Isolated",
      "Removed",
      "MergedWithNext",
      "Contiguous",
      "first",
      "never",
      "NFKC",
      "Lowercase",
      "ByteLevel",
      "Metaspace",
      "Fuse",
      json::array(),
      json::object(),
      json::array({1, 2}),
      {{"type", "Sequence"}},
      {{"type", "Split"}, {"pattern", {{"Regex", "(a|a)*$"}}}, {"behavior", "Isolated"}},
      {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "MergedWithPrevious"}},
      {{"type", "Replace"}, {"pattern", {{"String", "a"}}}, {"content", std::string(4000, 'a')}},
      {{"type", "Replace"}, {"pattern", {{"Regex", "\\s"}}}, {"content", ""}},
      {{"type", "NFD"}},
      {{"type", "Digits"}},
      {{"type", "Unigram"}, {"vocab", json::array()}},
      {{"type", "Metaspace"}, {"prepend_scheme", "sometimes"}},
      {{"type", "WordPiece"}, {"vocab", {{"a", 0}}}},
      {{"id", 5}, {"content", "<q>"}, {"normalized", true}, {"lstrip", true}}};
  auto deep = [](int n) {
    json j = json::array();
    for (int i = 0; i < n; ++i) j = json::array({j});
    return j;
  };
  // The places a mutation may hit: every value of the components and added tokens, the model's settings, and now
  // and then an entry of its vocabulary or merges.
  std::function<void(json&, std::vector<json*>&)> places = [&](json& j, std::vector<json*>& out) {
    out.push_back(&j);
    if (j.is_object() || j.is_array())
      for (auto& child : j) places(child, out);
  };
  const std::vector<std::string> texts = {"hello world", "a-b 12 <x> THE", "caf\xC3\xA9 \xE6\x9D\xB1",
                                          std::string(3000, 'a') + "!", "\xff bad"};
  int loaded = 0, refused = 0;
  for (int n = 0; n < 300; ++n) {
    json j = cases[rng() % cases.size()].second;
    for (int edits = 1 + static_cast<int>(rng() % 3); edits > 0; --edits) {
      std::vector<json*> all;
      for (const char* key : {"normalizer", "pre_tokenizer", "decoder", "added_tokens", "post_processor", "model"})
        all.push_back(&j[key]);
      for (const char* key : {"normalizer", "pre_tokenizer", "decoder", "added_tokens", "post_processor"})
        places(j[key], all);
      if (!j["model"].is_object()) break;
      for (auto& [key, value] : j["model"].items())
        if (key != "vocab" && key != "merges") all.push_back(&value);
      for (const char* table : {"vocab", "merges"})
        if (j["model"].contains(table) && j["model"][table].is_structured() && !j["model"][table].empty() &&
            rng() % 4 == 0) {
          auto& t = j["model"][table];
          all.push_back(&*std::next(t.begin(), static_cast<std::ptrdiff_t>(rng() % t.size())));
        }
      json* target = all[rng() % all.size()];
      *target = rng() % 16 == 0 ? deep(static_cast<int>(rng() % 5000)) : replacements[rng() % replacements.size()];
    }
    const auto start = std::chrono::steady_clock::now();
    try {
      text::PipelineTokenizer tok(j, "fuzz.json");
      for (const auto& t : texts) tok.decode(tok.encode(t));
      ++loaded;
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("fuzz.json"), std::string::npos)
          << "case " << n << ": " << std::string(e.what()).substr(0, 300);
      ++refused;
    }
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20.0) << "case " << n;
  }
  EXPECT_GT(loaded, 10);
  EXPECT_GT(refused, 10);
}

}  // namespace
}  // namespace zoo
