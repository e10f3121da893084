// Implementation of data/text/hf_tokenizer.h.
#include "data/text/hf_tokenizer.h"

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "data/text/hf_pipeline.h"
#include "data/text/sentencepiece_model.h"
#include "data/text/tokenizer_json.h"

namespace zoo::text {
namespace fs = std::filesystem;
namespace {

const char* const kFiles[] = {"tokenizer.json",        "tokenizer.model",         "spiece.model",
                              "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja"};

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
      if (named.is_object() && string_or(named, "name", "", path + ": chat_template[]") == "default")
        return string_at(named, "template", path + ": chat_template[default]");
    throw std::invalid_argument(path + ": chat_template: a list of templates without one named \"default\"");
  }
  throw std::invalid_argument(path + ": chat_template: expected a string or a list of {name, template}");
}

// tokenizer.json's post_processor: whether its single-sequence template starts or ends with a special token
// (TemplateProcessing; RoBERTa's and BERT's processors put theirs on both sides).
void read_post_processor(const nlohmann::json& tokenizer_json, SpecialTokens& special, const std::string& path) {
  const std::string where = path + ": post_processor";
  for (const auto& step : steps_of(tokenizer_json.value("post_processor", nlohmann::json()), "processors", where)) {
    const std::string type = type_of(step, where);
    if (type == "RobertaProcessing" || type == "BertProcessing") {
      special.add_bos = special.add_eos = true;
      continue;
    }
    if (type != "TemplateProcessing") continue;
    const auto& single = step.value("single", nlohmann::json::array());
    if (!single.is_array()) throw std::invalid_argument(where + ".single: expected a list of pieces");
    if (single.empty()) continue;
    special.add_bos = single.front().is_object() && single.front().contains("SpecialToken");
    special.add_eos = single.size() > 1 && single.back().is_object() && single.back().contains("SpecialToken");
  }
}

// Whether a normalizer is SentencePiece's compiled character map (T5, ALBERT), which the SentencePiece model file
// beside it applies exactly.
bool uses_precompiled(const nlohmann::json& node) {
  if (node.is_object() && node.value("type", nlohmann::json()) == "Precompiled") return true;
  if (node.is_object() && node.contains("normalizers") && node["normalizers"].is_array())
    for (const auto& step : node["normalizers"])
      if (uses_precompiled(step)) return true;
  return false;
}

// transformers >= 4.34 writes added_tokens_decoder as {"id": {"content": ..., "special": ...}}; older files a list.
std::vector<AddedToken> added_tokens_of(const nlohmann::json& config, const std::string& where) {
  const auto it = config.find("added_tokens_decoder");
  if (it == config.end() || it->is_null()) return {};
  if (it->is_array()) return read_added_tokens(*it, where + ": added_tokens_decoder");
  if (!it->is_object())
    throw std::invalid_argument(where + ": added_tokens_decoder: expected {\"id\": {\"content\": ...}, ...}, got " +
                                it->dump().substr(0, 200));
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [id, token] : it->items()) {
    char* end = nullptr;
    const long long value = std::strtoll(id.c_str(), &end, 10);
    if (id.empty() || *end != '\0' || value < 0 || value > INT32_MAX || !token.is_object())
      throw std::invalid_argument(where +
                                  ": added_tokens_decoder: expected token ids (0 .. 2147483647) mapped to "
                                  "{\"content\": ...}, got \"" +
                                  id + "\": " + token.dump().substr(0, 200));
    nlohmann::json entry = token;
    entry["id"] = value;
    list.push_back(std::move(entry));
  }
  return read_added_tokens(list, where + ": added_tokens_decoder");
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
  }
  nlohmann::json tokenizer_json;
  if (file.extension() == ".json") {
    tokenizer_json = parse_json_file(file.string(), "tokenizer file (tokenizer.json)");
    if (!tokenizer_json.is_object()) throw std::invalid_argument(file.string() + ": expected a JSON object");
    if (uses_precompiled(tokenizer_json.value("normalizer", nlohmann::json()))) {
      for (const char* name : {"spiece.model", "tokenizer.model"})
        if (fs::is_regular_file(dir / name)) {
          file = dir / name;
          tokenizer_json = nullptr;
          break;
        }
      if (!tokenizer_json.is_null())
        throw std::invalid_argument(file.string() +
                                    ": normalizer: a Precompiled (SentencePiece) character map, which "
                                    "zoo applies through the SentencePiece model file: put the model's spiece.model "
                                    "or tokenizer.model beside it");
    }
  }
  if (file.empty()) {
    throw std::invalid_argument(path +
                                ": no tokenizer.json, tokenizer.model or spiece.model (expected a tokenizer "
                                "directory as Hugging Face saves it)");
  }
  nlohmann::json config = nlohmann::json::object();
  const fs::path config_path = dir / "tokenizer_config.json";
  const std::string where = config_path.string();
  if (fs::is_regular_file(config_path)) {
    config = parse_json_file(config_path.string(), "tokenizer configuration (tokenizer_config.json)");
    if (!config.is_object()) throw std::invalid_argument(config_path.string() + ": expected a JSON object");
  }
  SpecialTokens special;
  special.source = dir.string();
  std::unique_ptr<Tokenizer> tokenizer;
  if (!tokenizer_json.is_null()) {
    read_post_processor(tokenizer_json, special, file.string());
    tokenizer = std::make_unique<PipelineTokenizer>(tokenizer_json, file.string());
  } else {
    // transformers' slow SentencePiece tokenizers put bos in front unless told otherwise (T5's none: it ends with eos).
    auto sp = std::make_unique<SentencePieceModel>(file.string(), added_tokens_of(config, where));
    const bool t5 = file.filename() == "spiece.model";
    special.add_bos = !t5 && sp->token_to_id("<s>").has_value();
    special.add_eos = t5;
    tokenizer = std::move(sp);
  }
  special.add_bos = bool_or(config, "add_bos_token", special.add_bos, where);
  special.add_eos = bool_or(config, "add_eos_token", special.add_eos, where);
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
  if (special.add_bos && !special.bos)
    throw std::invalid_argument(where + ": add_bos_token is true but there is no bos_token");
  if (special.add_eos && !special.eos)
    throw std::invalid_argument(where + ": add_eos_token is true but there is no eos_token");
  special.chat_template = chat_template_of(config, where);
  // transformers >= 4.47 saves the template in its own file, which wins over tokenizer_config.json's.
  if (fs::is_regular_file(dir / "chat_template.jinja"))
    special.chat_template = read_text_file((dir / "chat_template.jinja").string(), "chat template");
  // transformers' default when the file does not say.
  special.clean_up_spaces = bool_or(config, "clean_up_tokenization_spaces", true, where);
  tokenizer->set_special_tokens(std::move(special));
  return tokenizer;
}

}  // namespace zoo::text
