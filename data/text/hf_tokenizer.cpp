// Implementation of data/text/hf_tokenizer.h.
#include "data/text/hf_tokenizer.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <stdexcept>

#include "data/text/byte_bpe.h"
#include "data/text/sentencepiece_model.h"
#include "data/text/sp_bpe.h"
#include "data/text/tokenizer_json.h"

namespace zoo::text {
namespace fs = std::filesystem;
namespace {

const char* const kFiles[] = {"tokenizer.json", "tokenizer.model", "spiece.model", "tokenizer_config.json",
                              "special_tokens_map.json", "chat_template.jinja"};

// A special token in tokenizer_config.json: "text", {"content": "text", ...} or null.
std::string token_text(const nlohmann::json& config, const char* key, const std::string& path) {
  if (!config.contains(key) || config[key].is_null()) return "";
  const auto& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  throw std::invalid_argument(path + ": " + key + ": expected a token's text or {\"content\": text}, got " + v.dump());
}

// chat_template: a string, or a list of {name, template} where "default" is the one for chat.
std::string chat_template_of(const nlohmann::json& config, const std::string& path) {
  const auto& t = config.value("chat_template", nlohmann::json());
  if (t.is_null()) return "";
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    for (const auto& named : t)
      if (named.value("name", std::string()) == "default" && named.contains("template"))
        return named["template"].get<std::string>();
    throw std::invalid_argument(path + ": chat_template: a list of templates without one named \"default\"");
  }
  throw std::invalid_argument(path + ": chat_template: expected a string or a list of {name, template}");
}

// tokenizer.json's post_processor: whether its single-sequence template starts or ends with a special token.
void read_post_processor(const nlohmann::json& tokenizer_json, SpecialTokens& special) {
  const auto& pp = tokenizer_json.value("post_processor", nlohmann::json());
  std::vector<nlohmann::json> steps;
  if (pp.is_object() && pp.value("type", std::string()) == "Sequence") steps = pp.value("processors", steps);
  else if (pp.is_object()) steps.push_back(pp);
  for (const auto& step : steps) {
    if (step.value("type", std::string()) != "TemplateProcessing") continue;
    const auto& single = step.value("single", nlohmann::json::array());
    if (single.empty()) continue;
    special.add_bos = single.front().contains("SpecialToken");
    special.add_eos = single.size() > 1 && single.back().contains("SpecialToken");
  }
}

std::unique_ptr<Tokenizer> from_tokenizer_json(const std::string& file, SpecialTokens& special) {
  const nlohmann::json j = parse_json_file(file, "tokenizer file (tokenizer.json)");
  read_post_processor(j, special);
  if (SentencePieceBpe::describes(j)) return SentencePieceBpe::from_tokenizer_json(j, file);
  return ByteLevelBpe::from_tokenizer_json(j, file);
}

}  // namespace

std::vector<std::string> tokenizer_files(const std::string& dir) {
  std::vector<std::string> present;
  for (const char* name : kFiles)
    if (fs::is_regular_file(fs::path(dir) / name)) present.push_back((fs::path(dir) / name).string());
  return present;
}

std::unique_ptr<Tokenizer> load_huggingface_tokenizer(const std::string& path) {
  fs::path dir = path, file;
  if (fs::is_regular_file(path)) {
    dir = fs::path(path).parent_path();
    file = path;
  } else if (!fs::is_directory(path)) {
    throw std::invalid_argument("--huggingface_tokenizer " + path + ": no such directory or file");
  } else {
    for (const char* name : {"tokenizer.json", "tokenizer.model", "spiece.model"})
      if (file.empty() && fs::is_regular_file(dir / name)) file = dir / name;
    if (file.empty())
      throw std::invalid_argument(path + ": no tokenizer.json, tokenizer.model or spiece.model (expected a tokenizer "
                                  "directory as Hugging Face saves it)");
  }
  nlohmann::json config = nlohmann::json::object();
  const fs::path config_path = dir / "tokenizer_config.json";
  if (fs::is_regular_file(config_path)) {
    config = parse_json_file(config_path.string(), "tokenizer configuration (tokenizer_config.json)");
    if (!config.is_object()) throw std::invalid_argument(config_path.string() + ": expected a JSON object");
  }
  const std::string where = config_path.string();
  SpecialTokens special;
  special.source = dir.string();
  std::unique_ptr<Tokenizer> tokenizer;
  if (file.extension() == ".json") {
    tokenizer = from_tokenizer_json(file.string(), special);
  } else {
    // transformers' slow SentencePiece tokenizers put bos in front unless told otherwise (T5's none: it ends with eos).
    std::vector<AddedToken> added;
    for (const auto& [id, token] : config.value("added_tokens_decoder", nlohmann::json::object()).items())
      added.push_back({token.value("content", std::string()), std::stoi(id), token.value("special", false)});
    auto sp = std::make_unique<SentencePieceModel>(file.string(), std::move(added));
    const bool t5 = file.filename() == "spiece.model";
    special.add_bos = !t5 && sp->token_to_id("<s>").has_value();
    special.add_eos = t5;
    tokenizer = std::move(sp);
  }
  special.add_bos = config.value("add_bos_token", special.add_bos);
  special.add_eos = config.value("add_eos_token", special.add_eos);
  special.bos_token = token_text(config, "bos_token", where);
  special.eos_token = token_text(config, "eos_token", where);
  special.pad_token = token_text(config, "pad_token", where);
  special.unk_token = token_text(config, "unk_token", where);
  if (special.bos_token.empty() && tokenizer->token_to_id("<s>")) special.bos_token = "<s>";
  if (special.eos_token.empty() && tokenizer->token_to_id("</s>")) special.eos_token = "</s>";
  auto id_of = [&](const std::string& text, const char* key) -> std::optional<int32_t> {
    if (text.empty()) return std::nullopt;
    const auto id = tokenizer->token_to_id(text);
    if (!id) throw std::invalid_argument(where + ": " + key + " \"" + text + "\" is not in the tokenizer's vocabulary");
    return id;
  };
  special.bos = id_of(special.bos_token, "bos_token");
  special.eos = id_of(special.eos_token, "eos_token");
  special.pad = id_of(special.pad_token, "pad_token");
  if (special.add_bos && !special.bos) throw std::invalid_argument(where + ": add_bos_token is true but there is no bos_token");
  if (special.add_eos && !special.eos) throw std::invalid_argument(where + ": add_eos_token is true but there is no eos_token");
  special.chat_template = chat_template_of(config, where);
  // transformers >= 4.47 saves the template in its own file, which wins over tokenizer_config.json's.
  if (fs::is_regular_file(dir / "chat_template.jinja"))
    special.chat_template = read_text_file((dir / "chat_template.jinja").string(), "chat template");
  // transformers' default when the file does not say.
  special.clean_up_spaces = config.value("clean_up_tokenization_spaces", true);
  tokenizer->set_special_tokens(std::move(special));
  return tokenizer;
}

}  // namespace zoo::text
