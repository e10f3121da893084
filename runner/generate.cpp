// Implementation of runner/generate.h.
#include "runner/generate.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "data/text/chat_template.h"
#include "data/text/hf_tokenizer.h"
#include "models/registry.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/log.h"
#include "runner/model_guards.h"
#include "runner/params/params.h"

namespace zoo {

int64_t sample_next(const torch::Tensor& logits_in, const SamplingOptions& o, at::Generator& generator) {
  torch::Tensor logits = logits_in.to(torch::kFloat).cpu();
  if (o.temperature <= 0) return logits.argmax().item<int64_t>();
  logits = logits / o.temperature;
  if (o.top_k > 0 && o.top_k < logits.size(0)) {
    torch::Tensor kth = std::get<0>(logits.topk(o.top_k)).min();
    logits = logits.masked_fill(logits < kth, -std::numeric_limits<float>::infinity());
  }
  torch::Tensor probs = torch::softmax(logits, -1);
  if (o.top_p < 1.0) {
    // Keep the smallest set of most likely tokens whose mass reaches top_p.
    auto [sorted, order] = probs.sort(/*dim=*/-1, /*descending=*/true);
    torch::Tensor before = sorted.cumsum(-1) - sorted;  // mass strictly above each token
    torch::Tensor drop = torch::zeros_like(probs, torch::kBool).scatter(0, order, before >= o.top_p);
    probs = probs.masked_fill(drop, 0.0);
    probs = probs / probs.sum();
  }
  return torch::multinomial(probs, 1, /*replacement=*/false, generator).item<int64_t>();
}

std::vector<int64_t> generate_tokens(models::Model& model, const std::vector<int64_t>& prompt, const SamplingOptions& o,
                                     const std::function<void(int64_t)>& on_token) {
  if (prompt.empty()) throw std::invalid_argument("generation needs a non-empty prompt");
  if (!model.is_causal_lm()) throw std::invalid_argument("this model does not generate text");
  torch::NoGradGuard no_grad;
  model.eval();
  const torch::Device device = model.parameters().front().device();
  const int64_t context = model.max_positions();
  at::Generator generator = at::detail::createCPUGenerator(o.seed);
  std::vector<int64_t> tokens = prompt;
  models::GenerationCache cache;
  auto feed = [&](std::vector<int64_t> ids) {
    torch::Tensor t = torch::tensor(ids, torch::kLong).unsqueeze(0).to(device);
    return model.next_logits(t, cache).select(0, 0).select(0, -1);  // logits of the last position
  };
  // A prompt longer than the context keeps its end.
  std::vector<int64_t> start(tokens.end() - std::min<int64_t>(tokens.size(), context), tokens.end());
  torch::Tensor logits = feed(start);
  for (int64_t n = 0; n < o.max_new_tokens; ++n) {
    const int64_t next = sample_next(logits, o, generator);
    if (std::find(o.stop_tokens.begin(), o.stop_tokens.end(), next) != o.stop_tokens.end()) break;
    tokens.push_back(next);
    if (on_token) on_token(next);
    if (cache.positions >= context) {  // full: restart from the most recent half
      cache = models::GenerationCache();
      logits = feed(std::vector<int64_t>(tokens.end() - context / 2, tokens.end()));
    } else {
      logits = feed({next});
    }
  }
  return tokens;
}

LoadedLanguageModel load_language_model(const std::string& checkpoint_path,
                                        const std::optional<std::string>& params_file, const std::string& device_name,
                                        const text::TokenizerSpec& tokenizer) {
  std::string path = checkpoint_path;
  if (std::filesystem::is_directory(path)) {
    auto all = ckpt::list_checkpoints(path);
    if (all.empty())
      throw std::runtime_error("no checkpoint_<step>.mdl files in " + path +
                               " (checkpoints saved under another checkpoint_name: pass the file itself)");
    path = all.back().path;
  }
  c10::impl::GenericDict dict = ckpt::load_checkpoint_file(path);
  Params params = ckpt::params_of(dict, path, params_file, "--params");
  models::set_kernel_policy(kernel_policy_of(params.runconfig));
  torch::Device device = device_name == "GPU" ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  LoadedLanguageModel loaded;
  loaded.model = build_model(params, device);
  ckpt::load_model_state_dict(*loaded.model, ckpt::model_weights(dict, path), /*strict=*/true, path);
  text::TokenizerSpec spec = tokenizer;
  if (spec.type.empty()) {
    std::vector<std::string> searched;
    const std::string dir = ckpt::tokenizer_dir_of(dict, path, &searched);
    spec = dir.empty() ? text::TokenizerSpec{"ByteTokenizer", "", "", ""}
                       : text::TokenizerSpec{"HuggingFaceTokenizer", "", "", dir};
    if (dir.empty() && loaded.model->vocab_size().value_or(256) > 256) {
      std::string places;
      for (const auto& s : searched) places += (places.empty() ? "" : ", ") + s;
      log::warn("no tokenizer files in " + places +
                " (zoo convert copies them beside a converted checkpoint; a moved "
                "base leaves them behind): using the byte tokenizer, which cannot be this model's; pass "
                "--huggingface_tokenizer DIR");
    }
  }
  loaded.tokenizer = text::make_tokenizer(spec);
  loaded.tokenizer_type = spec.type;
  return loaded;
}

void run_generate(const GenerateCommand& c) {
  const LoadedLanguageModel loaded = load_language_model(c.checkpoint_path, c.params_file, c.device, c.tokenizer);
  const std::shared_ptr<models::Model>& model = loaded.model;
  const std::unique_ptr<text::Tokenizer>& tokenizer = loaded.tokenizer;
  const std::string& tokenizer_type = loaded.tokenizer_type;
  SamplingOptions sampling = c.sampling;
  std::vector<int32_t> ids;
  if (c.chat) {
    const auto& special = tokenizer->special_tokens();
    std::vector<text::ChatMessage> messages;
    if (!c.system.empty()) messages.push_back({"system", c.system});
    messages.push_back({"user", c.prompt});
    const text::ChatTemplate chat(special.chat_template, special,
                                  special.source.empty() ? tokenizer_type : special.source);
    // The template writes the special tokens, as apply_chat_template's text does.
    ids = tokenizer->encode(chat.render(messages, /*add_generation_prompt=*/true));
    if (special.eos) sampling.stop_tokens.push_back(*special.eos);
  } else {
    // As transformers' generate sees tokenizer(prompt): with the tokenizer's bos.
    ids = tokenizer->encode_with_special_tokens(c.prompt);
  }
  const int64_t vocab = model->vocab_size().value_or(tokenizer->vocab_size());
  for (int32_t id : ids)
    if (id >= vocab)
      throw std::invalid_argument("the prompt's token id " + std::to_string(id) + " (" + tokenizer_type +
                                  ") is outside the model's vocabulary (vocab_size " + std::to_string(vocab) +
                                  "); was the model trained with another tokenizer?");
  if (static_cast<int64_t>(ids.size()) > model->max_positions())
    log::warn(strf("the prompt's %zu tokens are more than the model's %ld positions: generation sees its last %ld",
                   ids.size(), static_cast<long>(model->max_positions()), static_cast<long>(model->max_positions())));
  if (!c.chat) std::cout << c.prompt << std::flush;
  // The new text as it settles: all generated tokens are decoded together (a
  // SentencePiece token's leading space, a character split across tokens,
  // depend on their neighbours) and what is settled and not printed yet is
  // printed; the rest once generation ends.
  std::vector<int32_t> generated;
  size_t printed = 0;
  std::string text;
  auto print_through = [&](size_t end) {
    if (end > printed) std::cout << text.substr(printed, end - printed) << std::flush;
    printed = std::max(printed, end);
  };
  generate_tokens(*model, std::vector<int64_t>(ids.begin(), ids.end()), sampling, [&](int64_t t) {
    generated.push_back(static_cast<int32_t>(t));
    text = text::decode_generated(*tokenizer, generated);
    print_through(text::settled_prefix(text));
  });
  print_through(text.size());
  std::cout << std::endl;
}

}  // namespace zoo
