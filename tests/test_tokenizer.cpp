// Tokenizers: GPT-2's files as a byte-level BPE pipeline against the reference encoder (npm
// gpt-3-encoder run with node), Hugging Face tokenizer.json, lossless round
// trips of arbitrary bytes, and clear errors for files zoo cannot use.
#include <nlohmann/json.hpp>
#include <random>

#include "data/text/hf_pipeline.h"
#include "data/text/regex_splitter.h"
#include "data/text/tokenizer.h"
#include "tests/test_util.h"
#include "tests/text_samples.h"

namespace zoo {
namespace {

using testing::fixed_texts;
using testing::gpt2_tokenizer_json;
using testing::random_text;
using testing::TempDir;

// Encodes each text with the reference JS encoder.
std::vector<std::vector<int32_t>> reference_encode(const std::string& encoder_dir,
                                                   const std::vector<std::string>& texts) {
  TempDir tmp;
  testing::write_file(tmp / "texts.json", nlohmann::json(texts).dump());
  testing::write_file(tmp / "encode.js",
                      "const {encode} = require(" + nlohmann::json(encoder_dir + "/Encoder.js").dump() +
                          ");\n"
                          "const texts = JSON.parse(require('fs').readFileSync(process.argv[2], 'utf-8'));\n"
                          "process.stdout.write(JSON.stringify(texts.map(encode)));\n");
  const auto r = testing::run_command("node " + testing::shell_quoted(tmp / "encode.js") + " " +
                                      testing::shell_quoted(tmp / "texts.json"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output).get<std::vector<std::vector<int32_t>>>();
}

TEST(Tokenizer, Gpt2BpeMatchesTheReferenceEncoder) {
  const std::string dir = testing::gpt3_encoder_dir();
  ZOO_SKIP_WITHOUT_GPT3_ENCODER(dir);
  auto bpe = text::gpt2_tokenizer(dir + "/encoder.json", dir + "/vocab.bpe");
  EXPECT_EQ(bpe->vocab_size(), 50257);
  EXPECT_EQ(bpe->token_to_id("<|endoftext|>"), 50256);

  std::vector<std::string> texts = fixed_texts();
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) texts.push_back(random_text(rng, 1 + static_cast<int>(rng() % 60)));
  const auto expected = reference_encode(dir, texts);
  ASSERT_EQ(expected.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(bpe->encode(texts[i]), expected[i]) << "text " << i << ": '" << texts[i] << "'";
    EXPECT_EQ(bpe->decode(expected[i]), texts[i]);
  }
  EXPECT_EQ(bpe->encode("Hello world"), (std::vector<int32_t>{15496, 995}));  // GPT-2's well-known ids
}

TEST(Tokenizer, ByteLevelBpeRoundTripsArbitraryBytes) {
  // Vocabulary: the 256 byte tokens (GPT-2's printable mapping, found by
  // decoding nothing else) plus merges, written as the GPT-2 files.
  TempDir tmp;
  nlohmann::json encoder = nlohmann::json::object();
  std::vector<std::string> byte_tokens;
  {
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? b : next++;
      std::string t;
      if (cp < 0x80) t += static_cast<char>(cp);
      else {
        t += static_cast<char>(0xC0 | (cp >> 6));
        t += static_cast<char>(0x80 | (cp & 0x3F));
      }
      byte_tokens.push_back(t);
      encoder[t] = static_cast<int>(b);
    }
  }
  const std::string G = byte_tokens[' '];  // "Ġ"
  const std::vector<std::pair<std::string, std::string>> merges = {
      {G, "t"}, {"h", "e"}, {G + "t", "he"}, {"i", "n"}, {G, "a"}, {"e", "r"}, {G, G}, {G + G, G + G}};
  std::string merges_text = "#version: 0.2\n";
  int id = 256;
  for (const auto& [a, b] : merges) {
    merges_text += a + " " + b + "\n";
    encoder[a + b] = id++;
  }
  testing::write_file(tmp / "encoder.json", encoder.dump());
  testing::write_file(tmp / "vocab.bpe", merges_text);
  auto bpe = text::gpt2_tokenizer(tmp / "encoder.json", tmp / "vocab.bpe");

  EXPECT_EQ(bpe->encode(" the"), (std::vector<int32_t>{encoder[G + "the"].get<int32_t>()}));
  auto id_of = [&](const std::string& t) { return encoder[t].get<int32_t>(); };
  // Whitespace before a word leaves its last space to the word (the (?!\S) lookahead) ...
  EXPECT_EQ(bpe->encode("    x"), (std::vector<int32_t>{id_of(G + G), id_of(G), id_of(G), 'x'}));
  // ... and at the end of the text stays one piece, merged by rank.
  EXPECT_EQ(bpe->encode("    "), (std::vector<int32_t>{id_of(G + G + G + G)}));

  std::mt19937 rng(11);
  std::vector<std::string> texts = {std::string("\0\x01\x7f", 3),
                                    "\xff\xfe\xfd invalid \xc3 utf-8 \xe2\x82",
                                    "\xed\xa0\x80 surrogate",
                                    "  \n\n  \t\t\r\n  ",
                                    "''''s'''ll",
                                    std::string(5000, ' '),
                                    "the the the",
                                    "\xf4\x8f\xbf\xbf max"};
  for (int i = 0; i < 300; ++i) texts.push_back(random_text(rng, static_cast<int>(rng() % 80)));
  for (int i = 0; i < 300; ++i) {  // raw random bytes, mostly invalid UTF-8
    std::string s(rng() % 64, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    texts.push_back(s);
  }
  for (const auto& t : texts) ASSERT_EQ(bpe->decode(bpe->encode(t)), t);
  EXPECT_THROW(bpe->decode({static_cast<int32_t>(bpe->vocab_size())}), std::out_of_range);
}

TEST(Tokenizer, HuggingFaceTokenizerJsonMatchesTheReferenceEncoder) {
  const std::string dir = testing::gpt3_encoder_dir();
  ZOO_SKIP_WITHOUT_GPT3_ENCODER(dir);
  TempDir tmp;
  nlohmann::json j = gpt2_tokenizer_json(dir);
  testing::write_file(tmp / "tokenizer.json", j.dump());
  auto tok = text::make_tokenizer({"HuggingFaceTokenizer", "", tmp / "tokenizer.json", ""});
  const auto expected = reference_encode(dir, fixed_texts());
  for (size_t i = 0; i + 1 < fixed_texts().size(); ++i)
    if (fixed_texts()[i].find("<|endoftext|>") == std::string::npos)
      EXPECT_EQ(tok->encode(fixed_texts()[i]), expected[i]) << fixed_texts()[i];
  // Added tokens are matched whole before pre-tokenization, as in Hugging Face tokenizers.
  EXPECT_EQ(tok->encode("Hello<|endoftext|> world"), (std::vector<int32_t>{15496, 50256, 995}));
  EXPECT_EQ(tok->decode({15496, 50256, 995}), "Hello<|endoftext|> world");

  // A Split pre-tokenizer with its own regex, then ByteLevel without one (the Llama 3 layout).
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"}, {"pattern", {{"Regex", text::kGpt2Pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  j["model"]["merges"] = nlohmann::json::array();
  std::istringstream lines(testing::read_file(dir + "/vocab.bpe"));
  std::string line;
  std::getline(lines, line);
  while (std::getline(lines, line))  // the newer [left, right] merge form
    if (auto sp = line.find(' '); sp != std::string::npos)
      j["model"]["merges"].push_back({line.substr(0, sp), line.substr(sp + 1)});
  testing::write_file(tmp / "split.json", j.dump());
  auto split = text::make_tokenizer({"NeoXTokenizer", "", tmp / "split.json", ""});
  EXPECT_EQ(split->encode(fixed_texts()[4]), expected[4]);
}

TEST(Tokenizer, FilesZooCannotUseAreClearErrors) {
  TempDir tmp;
  auto error = [](const text::TokenizerSpec& spec) {
    try {
      text::make_tokenizer(spec);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  testing::write_file(tmp / "wordpiece.json", R"({"model": {"type": "WordPiece", "vocab": {}}})");
  std::string e = error({"HuggingFaceTokenizer", "", tmp / "wordpiece.json", ""});
  EXPECT_NE(e.find(tmp / "wordpiece.json" + ": model.unk_token: \"[UNK]\" is not in the vocabulary"), std::string::npos)
      << e;

  testing::write_file(tmp / "broken.json", "{\"model\": ");
  e = error({"HuggingFaceTokenizer", "", tmp / "broken.json", ""});
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;

  testing::write_file(tmp / "encoder.json", R"({"a": 0})");
  testing::write_file(tmp / "vocab.bpe", "#version: 0.2\na b c\n");
  e = error({"GPT2Tokenizer", tmp / "vocab.bpe", tmp / "encoder.json", ""});
  EXPECT_NE(e.find(tmp / "vocab.bpe" + ":2"), std::string::npos) << e;  // file and line of the bad merge

  e = error({"GPT2Tokenizer", "", tmp / "encoder.json", ""});
  EXPECT_NE(e.find("--vocab_file"), std::string::npos) << e;
  e = error({"SentencePiece", "", "", ""});
  EXPECT_NE(e.find("GPT2Tokenizer"), std::string::npos) << e;
}

}  // namespace
}  // namespace zoo
