// Hugging Face tokenizer directories: SentencePiece models through the
// SentencePiece library against its Python binding, SentencePiece-style and
// byte-level tokenizer.json files against transformers.js, tokenizer_config.json's
// special tokens, and clear errors for directories zoo cannot use.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

#include "data/text/hf_tokenizer.h"
#include "data/text/tokenizer.h"
#include "tests/test_util.h"
#include "tests/text_samples.h"
#include "tests/tokenizer_fixtures.h"

namespace zoo {
namespace {

using testing::TempDir;

using testing::make_llama_tokenizer;
using testing::oracle_path;

// Texts with whitespace runs, accents, CJK, emoji, special tokens inside the
// text, characters the tiny vocabulary lacks (byte fallback), and random text.
std::vector<std::string> corpus() {
  std::vector<std::string> texts = testing::fixed_texts();
  for (const char* t : {"<s>Hello</s>", "a <s> b</s>c", "  two  leading", "trailing   ", "\n\nnew lines\n",
                        "ñandú جمل Ωμέγα 😀🎉 東京 서울", "\t tab \t", "</s></s>", "x"})
    texts.push_back(t);
  std::mt19937 rng(5);
  for (int i = 0; i < 150; ++i) texts.push_back(testing::random_text(rng, 1 + static_cast<int>(rng() % 50)));
  return texts;
}

struct JsReference {
  std::vector<std::vector<int32_t>> plain, special;
  std::vector<std::string> decoded;
};

JsReference transformers_js_encode(const std::string& js_dir, const std::filesystem::path& tokenizer_dir,
                                   const std::vector<std::string>& texts) {
  TempDir tmp;
  testing::write_file(tmp / "texts.json", nlohmann::json(texts).dump());
  const auto r =
      testing::run_node_oracle(js_dir, "tokenizer_transformers_js.mjs",
                               testing::shell_quoted(tokenizer_dir) + " " + testing::shell_quoted(tmp / "texts.json"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  return {j["plain"].get<std::vector<std::vector<int32_t>>>(), j["special"].get<std::vector<std::vector<int32_t>>>(),
          j["decoded"].get<std::vector<std::string>>()};
}

TEST(HfTokenizer, SentencePieceModelMatchesTheSentencePieceLibrary) {
  ZOO_SKIP_WITHOUT_SENTENCEPIECE();
  TempDir tmp;
  make_llama_tokenizer(tmp / "llama", "prepend");
  std::filesystem::remove(tmp / "llama/tokenizer.json");  // the directory now holds tokenizer.model only
  const auto texts = corpus();
  testing::write_file(tmp / "texts.json", nlohmann::json(texts).dump());
  const auto r = testing::run_command(
      "/usr/bin/python3 " + testing::shell_quoted(oracle_path("tokenizer_sentencepiece_encode.py")) + " " +
      testing::shell_quoted(tmp / "llama/tokenizer.model") + " " + testing::shell_quoted(tmp / "texts.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto reference = nlohmann::json::parse(r.output);
  auto tok = text::make_tokenizer({"HuggingFaceTokenizer", "", "", tmp / "llama"});
  int byte_fallbacks = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto expected = reference["ids"][i].get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(texts[i]), expected) << "text " << i << ": '" << texts[i] << "'";
    // The library drops control pieces in decoding; transformers' slow tokenizer (and zoo) write them out.
    if (std::count(expected.begin(), expected.end(), 1) + std::count(expected.begin(), expected.end(), 2) == 0)
      EXPECT_EQ(tok->decode(expected), reference["decoded"][i].get<std::string>()) << texts[i];
    for (int32_t id : expected) byte_fallbacks += id >= 3 && id < 259;  // <0x00>..<0xFF>
  }
  EXPECT_GT(byte_fallbacks, 100) << "the corpus should exercise byte fallback";
  EXPECT_EQ(tok->decode(tok->encode("<s>Hello</s> world")), "<s>Hello</s> world");
  // tokenizer_config.json: bos in front, no eos, and the special tokens' ids.
  EXPECT_EQ(tok->special_tokens().bos, 1);
  EXPECT_EQ(tok->special_tokens().eos, 2);
  EXPECT_EQ(tok->encode_with_special_tokens("Hello").front(), 1);
  EXPECT_NE(tok->encode_with_special_tokens("Hello").back(), 2);
}

// Decoding against the tokenizers library: transformers.js's Metaspace decoder keeps all but one of the first
// token's spaces, where the library (and transformers) drops them all.
TEST(HfTokenizer, LlamaStyleTokenizerJsonMatchesTransformersJs) {
  ZOO_SKIP_WITHOUT_SENTENCEPIECE();
  const std::string js = testing::transformers_js_dir();
  ZOO_SKIP_WITHOUT_TRANSFORMERS_JS(js);
  const std::string rust = testing::rust_tokenizers_dir();
  ZOO_SKIP_WITHOUT_RUST_TOKENIZERS(rust);
  const auto texts = corpus();
  for (const std::string layout : {"prepend", "metaspace"}) {
    TempDir tmp;
    make_llama_tokenizer(tmp / "tok", layout);
    const JsReference ref = transformers_js_encode(js, tmp / "tok", texts);
    testing::write_file(tmp / "texts.json", nlohmann::json(texts).dump());
    const auto r = testing::run_node_oracle(
        rust, "tokenizer_rust.mjs",
        testing::shell_quoted(tmp / "texts.json") + " " + testing::shell_quoted(tmp / "tok/tokenizer.json"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto library = nlohmann::json::parse(r.output)[tmp / "tok/tokenizer.json"];
    auto tok = text::make_tokenizer({"HuggingFaceTokenizer", "", "", tmp / "tok"});
    for (size_t i = 0; i < texts.size(); ++i) {
      EXPECT_EQ(tok->encode(texts[i]), ref.plain[i]) << layout << " text " << i << ": '" << texts[i] << "'";
      EXPECT_EQ(tok->encode_with_special_tokens(texts[i]), ref.special[i]) << layout << " text " << i;
      EXPECT_EQ(tok->decode(ref.plain[i]), library["decoded"][i].get<std::string>())
          << layout << " text " << i << ": '" << texts[i] << "'";
      if (layout == "prepend")
        EXPECT_EQ(tok->decode_like_transformers(ref.plain[i]), ref.decoded[i])
            << layout << " text " << i << ": '" << texts[i] << "'";
    }
  }
}

TEST(HfTokenizer, ByteLevelTokenizerJsonMatchesTransformersJs) {
  const std::string gpt2 = testing::gpt3_encoder_dir();
  ZOO_SKIP_WITHOUT_GPT3_ENCODER(gpt2);
  const std::string js = testing::transformers_js_dir();
  ZOO_SKIP_WITHOUT_TRANSFORMERS_JS(js);
  TempDir tmp;
  std::filesystem::create_directory(tmp / "gpt2");
  nlohmann::json j = testing::gpt2_tokenizer_json(gpt2);
  j["post_processor"] = nullptr;
  testing::write_file(tmp / "gpt2/tokenizer.json", j.dump());
  testing::write_file(
      tmp / "gpt2/tokenizer_config.json",
      R"({"tokenizer_class": "GPT2Tokenizer", "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"})");
  const auto texts = corpus();
  const JsReference ref = transformers_js_encode(js, tmp / "gpt2", texts);
  auto tok = text::make_tokenizer({"HuggingFaceTokenizer", "", "", tmp / "gpt2"});
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(tok->encode(texts[i]), ref.plain[i]) << "text " << i << ": '" << texts[i] << "'";
    EXPECT_EQ(tok->encode_with_special_tokens(texts[i]), ref.special[i]) << "text " << i;
    EXPECT_EQ(tok->decode_like_transformers(ref.plain[i]), ref.decoded[i]) << "text " << i << ": '" << texts[i] << "'";
  }
  EXPECT_EQ(tok->special_tokens().eos, 50256);
}

TEST(HfTokenizer, DirectoriesZooCannotUseAreClearErrors) {
  TempDir tmp;
  auto error = [](const std::string& dir) {
    try {
      text::make_tokenizer({"HuggingFaceTokenizer", "", "", dir});
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::filesystem::create_directory(tmp / "empty");
  std::string e = error(tmp / "empty");
  EXPECT_NE(e.find(tmp / "empty"), std::string::npos) << e;
  EXPECT_NE(e.find("no tokenizer.json, tokenizer.model or spiece.model"), std::string::npos) << e;
  EXPECT_NE(error(tmp / "missing").find("no such directory"), std::string::npos);

  std::filesystem::create_directory(tmp / "bad_model");
  testing::write_file(tmp / "bad_model/tokenizer.model", "not a protobuf");
  e = error(tmp / "bad_model");
  EXPECT_NE(e.find(tmp / "bad_model/tokenizer.model"), std::string::npos) << e;

  // T5's tokenizer.json compiles SentencePiece's normalization into a charsmap, applied through spiece.model.
  std::filesystem::create_directory(tmp / "t5");
  testing::write_file(
      tmp / "t5/tokenizer.json",
      R"({"normalizer": {"type": "Sequence", "normalizers": [{"type": "Precompiled", "precompiled_charsmap": "AA=="}]},
                          "pre_tokenizer": {"type": "Metaspace"}, "decoder": {"type": "Metaspace"},
                          "model": {"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0]]}})");
  e = error(tmp / "t5");
  EXPECT_NE(e.find(tmp / "t5/tokenizer.json" + ": normalizer: a Precompiled (SentencePiece) character map"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("spiece.model"), std::string::npos) << e;

  // transformers >= 4.34 writes added_tokens_decoder as a dict, older ones a list; ids must be ids.
  ASSERT_NO_FATAL_FAILURE(make_llama_tokenizer(tmp / "decoder_dict", "prepend"));
  std::filesystem::remove(tmp / "decoder_dict/tokenizer.json");
  testing::write_file(
      tmp / "decoder_dict/tokenizer_config.json",
      R"({"added_tokens_decoder": {"0": {"content": "<unk>", "special": true}, "1": {"content": "<s>", "special": true},
                          "2": {"content": "</s>", "special": true}, "32000": {"content": "<|im_end|>", "special": true, "lstrip": false}}})");
  auto dict = text::make_tokenizer({"HuggingFaceTokenizer", "", "", tmp / "decoder_dict"});
  EXPECT_EQ(dict->token_to_id("<|im_end|>"), 32000);
  EXPECT_EQ(dict->encode("a<|im_end|>").back(), 32000);
  testing::write_file(tmp / "decoder_dict/tokenizer_config.json",
                      R"({"added_tokens_decoder": [{"id": 32000, "content": "<|im_end|>"}]})");
  EXPECT_EQ(text::make_tokenizer({"HuggingFaceTokenizer", "", "", tmp / "decoder_dict"})->token_to_id("<|im_end|>"),
            32000);
  for (const char* bad :
       {R"({"added_tokens_decoder": {"-1": {"content": "<x>"}}})",
        R"({"added_tokens_decoder": {"4294967296": {"content": "<x>"}}})",
        R"({"added_tokens_decoder": [{"id": -1, "content": "<x>"}]})", R"({"added_tokens_decoder": "no"})"}) {
    testing::write_file(tmp / "decoder_dict/tokenizer_config.json", bad);
    e = error(tmp / "decoder_dict");
    EXPECT_NE(e.find("tokenizer_config.json: added_tokens_decoder"), std::string::npos) << bad << ": " << e;
  }

  ASSERT_NO_FATAL_FAILURE(make_llama_tokenizer(tmp / "config", "prepend"));
  testing::write_file(tmp / "config/tokenizer_config.json", R"({"eos_token": "<|im_end|>"})");
  e = error(tmp / "config");
  EXPECT_NE(e.find("tokenizer_config.json: eos_token \"<|im_end|>\" is not in the tokenizer's vocabulary"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace zoo
