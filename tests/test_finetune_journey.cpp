// The fine-tuning journey of docs/finetuning.md end to end on the CPU, with
// the zoo binary as a user runs it: a tiny Llama-style model and its
// SentencePiece tokenizer in Hugging Face's layout -> zoo convert -> chat
// .jsonl -> zoo data create-hdf5 Chat -> LoRA fine-tune -> eval with a
// downstream task -> eval_all -> PEFT adapter and merged model -> zoo
// generate --chat -> zoo serve's chat API.
#include <gtest/gtest.h>

#include <random>

#include "convert_fixtures.h"
#include "runner/checkpoint/checkpoint.h"
#include "serve_fixtures.h"
#include "test_util.h"
#include "tests/tokenizer_fixtures.h"

namespace zoo {
namespace {

using nlohmann::json;
using testing::TempDir;

const char* kReply = "I am a tiny llama.";

// Conversations whose assistant always gives kReply, whatever the user asks.
std::string chats(std::mt19937& rng, int n) {
  const std::vector<std::string> words = {"cats", "rain", "boats", "music", "stars", "bread", "trains", "snow"};
  std::string lines;
  for (int i = 0; i < n; ++i) {
    const std::string topic = words[rng() % words.size()], other = words[rng() % words.size()];
    json messages = json::array({{{"role", "user"}, {"content", "Tell me about " + topic + " and " + other + "."}},
                                 {{"role", "assistant"}, {"content", kReply}}});
    if (i % 3 == 0) messages.insert(messages.begin(), json{{"role", "system"}, {"content", "Answer briefly."}});
    lines += json{{"messages", messages}}.dump() + "\n";
  }
  return lines;
}

// A multiple-choice task (docs/evaluation.md): after a Llama 2 chat prompt,
// kReply among three other replies, at a different place each time.
std::string reply_task(std::mt19937& rng, int n) {
  const std::vector<std::string> words = {"cats", "rain", "boats", "music", "stars", "bread", "trains", "snow"};
  const std::vector<std::string> others = {"The sky is green today.", "Boats float on the rain.",
                                           "Bread is a kind of music."};
  std::string lines;
  for (int i = 0; i < n; ++i) {
    std::vector<std::string> choices = others;
    choices.insert(choices.begin() + i % 4, kReply);
    const std::string ask =
        "Tell me about " + words[rng() % words.size()] + " and " + words[rng() % words.size()] + ".";
    lines += json{{"context", "<s>[INST] " + ask + " [/INST]"}, {"choices", choices}, {"gold", i % 4}}.dump() + "\n";
  }
  return lines;
}

// The value of "Metric: NAME = V" in a run's output (the last one), NaN when absent.
double metric(const std::string& output, const std::string& name) {
  const std::string line = "Metric: " + name + " = ";
  const size_t at = output.rfind(line);
  return at == std::string::npos ? std::nan("") : std::stod(output.substr(at + line.size()));
}

TEST(FinetuneJourney, LoraOnChatDataOfAConvertedLlamaLearnsItsRepliesAndExports) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  ZOO_SKIP_WITHOUT_SENTENCEPIECE();
  ZOO_SKIP_WITHOUT_H5PY();
  TempDir dir;
  const std::string zoo = testing::zoo_binary();
  auto run = [&](const std::string& args) {
    const auto r = testing::run_command(zoo + " " + args);
    EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
    return r.output;
  };
  // A Hugging Face directory: the tokenizer (with Llama 2's chat template) and a random Llama of its vocabulary.
  testing::make_tiny_chat_llama(dir);
  ASSERT_FALSE(HasFatalFailure());

  run("convert " + (dir / "hf") + " --src-fmt hf --tgt-fmt zoo --output-dir " + (dir / "base"));
  ASSERT_TRUE(std::filesystem::exists(dir / "base/tokenizer.model")) << "zoo convert copies the tokenizer";
  ASSERT_TRUE(std::filesystem::exists(dir / "base/tokenizer_config.json"));
  EXPECT_NE(testing::read_file(dir / "base/params.yaml")
                .find("# Tokenizer: tokenizer.json, tokenizer.model, tokenizer_config.json in "),
            std::string::npos)
      << "the params name the tokenizer beside them";

  std::mt19937 rng(7);
  testing::write_file(dir / "chats/train/a.jsonl", chats(rng, 48));
  testing::write_file(dir / "chats/eval/a.jsonl", chats(rng, 16));
  for (const char* split : {"train", "eval"}) {
    const std::string out = run("data create-hdf5 Chat --input_dir " + (dir / ("chats/" + std::string(split))) +
                                " --output_dir " + (dir / ("data/" + std::string(split))) +
                                " --huggingface_tokenizer " + (dir / "base") + " --max_seq_length 96");
    EXPECT_NE(out.find("0 truncated, 0 dropped"), std::string::npos) << out;
    const std::string packed = run("data create-hdf5 Chat --input_dir " + (dir / ("chats/" + std::string(split))) +
                                   " --output_dir " + (dir / ("data/packed_" + std::string(split))) +
                                   " --huggingface_tokenizer " + (dir / "base") + " --max_seq_length 96 --pack true");
    EXPECT_NE(packed.find("Packed "), std::string::npos) << packed;  // for the shipped recipe, which packs
  }

  // The converted params, pointed at the data, with LoRA on every dense layer of the decoder.
  YAML::Node p = YAML::LoadFile(dir / "base/params.yaml");
  for (const char* split : {"train", "eval"}) {
    YAML::Node in = p[std::string(split) + "_input"];
    in["data_dir"] = dir / ("data/" + std::string(split));
    in["batch_size"] = 8;
    in["shuffle"] = std::string(split) == "train";
  }
  p["model"]["lora_params"] = YAML::Load("{r: 8, alpha: 16, merge_weights: true}");
  p["optimizer"]["learning_rate"] = 0.01;
  p["optimizer"]["weight_decay"] = 0.0;
  p["runconfig"]["num_steps"] = 30;
  p["runconfig"]["checkpoint_steps"] = 30;
  p["runconfig"]["log_steps"] = 10;
  p["runconfig"]["seed"] = 1;
  p["runconfig"]["model_dir"] = dir / "ft";
  // What the fine-tune is for, measured with every evaluation: does the model pick the reply it is taught?
  testing::write_file(dir / "tasks/replies.jsonl", reply_task(rng, 8));
  p["eval_tasks"]["tasks"].push_back(dir / "tasks/replies.jsonl");
  YAML::Emitter e;
  e << p;
  testing::write_file(dir / "ft.yaml", e.c_str());

  const std::string validated = run("CPU --params " + (dir / "ft.yaml") + " --mode train --validate_only");
  EXPECT_NE(validated.find("LoRA: adapters on 14 dense layers"), std::string::npos) << validated;
  // Held out, before: the base model (B = 0) on the assistant turns.
  const std::string base_eval = run("CPU --params " + (dir / "ft.yaml") + " --mode eval");
  EXPECT_NE(base_eval.find("has no checkpoint of this run yet: evaluating runconfig.checkpoint_path"),
            std::string::npos)
      << base_eval;
  const double before = testing::eval_loss(base_eval);
  run("CPU --params " + (dir / "ft.yaml") + " --mode train");
  const std::string trained = dir / "ft/checkpoint_30.mdl";
  ASSERT_TRUE(std::filesystem::exists(trained));
  const std::string trained_eval =
      run("CPU --params " + (dir / "ft.yaml") + " --mode eval --checkpoint_path " + trained);
  const double after = testing::eval_loss(trained_eval);
  std::cout << "[ journey ] held-out assistant-turn loss " << before << " -> " << after << "; replies task acc "
            << metric(base_eval, "eval/replies/acc") << " -> " << metric(trained_eval, "eval/replies/acc") << "\n";
  EXPECT_LT(after, 0.3 * before) << "held-out assistant-turn loss: " << before << " -> " << after;
  EXPECT_LT(metric(base_eval, "eval/replies/acc"), 0.5) << base_eval;
  EXPECT_EQ(metric(trained_eval, "eval/replies/acc"), 1.0) << trained_eval;
  EXPECT_EQ(metric(trained_eval, "eval/replies/acc_norm"), 1.0) << trained_eval;
  // The same params evaluate what the run trained, not the base they started from: eval and eval_all as written.
  const std::string evaluated = run("CPU --params " + (dir / "ft.yaml") + " --mode eval");
  EXPECT_NE(evaluated.find("holds the run's own checkpoints, so this evaluates the newest"), std::string::npos)
      << evaluated;
  EXPECT_DOUBLE_EQ(testing::eval_loss(evaluated), after);
  const std::string all = run("CPU --params " + (dir / "ft.yaml") + " --mode eval_all");
  EXPECT_NE(all.find("checkpoint_30.mdl"), std::string::npos) << all;
  EXPECT_DOUBLE_EQ(testing::eval_loss(all), after);

  // Stopped at step 15 and started again with the same command, the run
  // resumes from its own checkpoint (not the base checkpoint_path names) and
  // ends with the same adapters, bit for bit.
  const std::string split_run = "CPU --params " + (dir / "ft.yaml") + " --mode train --model_dir " + (dir / "ft2");
  run(split_run + " --max_steps 15");
  const std::string resumed = run(split_run + " --max_steps 30");
  EXPECT_NE(resumed.find("is where the run started;"), std::string::npos) << resumed;
  // eval_all scores the task for every checkpoint of that run: a results.csv row and TensorBoard scalars each.
  run("CPU --params " + (dir / "ft.yaml") + " --mode eval_all --model_dir " + (dir / "ft2"));
  const std::string csv = testing::read_file(dir / "ft2/eval/results.csv");
  const std::string header = csv.substr(0, csv.find('\n')) + ",";
  for (const char* column : {",eval/replies/acc,", ",eval/replies/acc_norm,"})
    EXPECT_NE(header.find(column), std::string::npos) << csv;
  for (const char* step : {"checkpoint_15.mdl,15,", "checkpoint_30.mdl,30,"})
    EXPECT_NE(csv.find(step), std::string::npos) << csv;
  std::string events;
  for (const auto& f : std::filesystem::directory_iterator(dir / "ft2/eval"))
    if (f.path().filename().string().rfind("events.out.tfevents", 0) == 0) events += testing::read_file(f.path());
  EXPECT_NE(events.find("eval/replies/acc_norm"), std::string::npos) << "a TensorBoard scalar per task metric";
  const auto once = ckpt::load_checkpoint_file(trained).at("model").toGenericDict();
  const auto twice = ckpt::load_checkpoint_file(dir / "ft2/checkpoint_30.mdl").at("model").toGenericDict();
  for (const auto& kv : once)
    EXPECT_TRUE(torch::equal(kv.value().toTensor(), twice.at(kv.key()).toTensor())) << kv.key().toStringRef();

  // Only the adapters moved: every base tensor is the converted one, bit for bit.
  const auto base = ckpt::load_checkpoint_file(dir / "base/checkpoint_0.mdl").at("model").toGenericDict();
  const auto tuned = ckpt::load_checkpoint_file(trained).at("model").toGenericDict();
  EXPECT_EQ(tuned.size(), base.size() + 2 * 14);
  for (const auto& kv : base)
    EXPECT_TRUE(torch::equal(kv.value().toTensor(), tuned.at(kv.key()).toTensor())) << kv.key().toStringRef();

  // The shipped recipe, its model shrunk to the converted one's shape (LoRA, bfloat16 base, activation checkpointing
  // and the schedule as shipped), trains and evaluates; eval and eval_all as written read its own checkpoints.
  YAML::Node shipped = YAML::LoadFile(testing::source_dir() + "/configs/finetune/llama2_7b_lora_chat.yaml");
  for (const auto& kv : YAML::LoadFile(dir / "base/params.yaml")["model"])
    shipped["model"][kv.first.as<std::string>()] = kv.second;
  shipped["train_input"]["data_dir"] = dir / "data/packed_train";
  shipped["eval_input"]["data_dir"] = dir / "data/packed_eval";
  shipped["runconfig"] = YAML::Load(
      "{num_steps: 4, checkpoint_steps: 2, eval_frequency: 2, eval_steps: 1, log_steps: 1, "
      "max_checkpoints: 3, seed: 1, load_checkpoint_states: model}");
  shipped["runconfig"]["model_dir"] = dir / "shipped";
  shipped["runconfig"]["checkpoint_path"] = dir / "base/checkpoint_0.mdl";
  YAML::Emitter shipped_yaml;
  shipped_yaml << shipped;
  testing::write_file(dir / "shipped.yaml", shipped_yaml.c_str());
  run("CPU --params " + (dir / "shipped.yaml") + " --mode train_and_eval");
  for (const char* step : {"shipped/checkpoint_2.mdl", "shipped/checkpoint_4.mdl"})
    EXPECT_TRUE(std::filesystem::exists(dir / step)) << step;
  const std::string shipped_eval = run("CPU --params " + (dir / "shipped.yaml") + " --mode eval");
  EXPECT_NE(shipped_eval.find("holds the run's own checkpoints, so this evaluates the newest"), std::string::npos)
      << shipped_eval;
  const std::string shipped_all = run("CPU --params " + (dir / "shipped.yaml") + " --mode eval_all");
  for (const char* step : {"checkpoint_2.mdl", "checkpoint_4.mdl"})
    EXPECT_NE(shipped_all.find(step), std::string::npos) << shipped_all;
  EXPECT_EQ(shipped_all.find("checkpoint_0.mdl"), std::string::npos) << "the base is not one of the run's checkpoints";

  // Exports: the PEFT adapter and the merged model.
  run("convert " + trained + " --model llama --src-fmt zoo --tgt-fmt hf --output-dir " + (dir / "export"));
  for (const char* f : {"adapter/adapter_config.json", "adapter/adapter_model.safetensors", "model.safetensors",
                        "config.json", "tokenizer.model", "tokenizer_config.json"})
    EXPECT_TRUE(std::filesystem::exists(dir / ("export/" + std::string(f)))) << f;
  // PEFT's base is the Hugging Face model converted at the start; the merged config names its bos and eos.
  EXPECT_EQ(json::parse(testing::read_file(dir / "export/adapter/adapter_config.json"))["base_model_name_or_path"],
            dir / "hf");
  const json exported = json::parse(testing::read_file(dir / "export/config.json"));
  EXPECT_EQ(exported.value("bos_token_id", -1), 1);
  EXPECT_EQ(exported.value("eos_token_id", -1), 2);

  // The fine-tuned model answers a chat prompt as it learned to (its tokenizer found beside the base).
  const std::string answer =
      run("generate --checkpoint_path " + (dir / "ft") +
          " --chat --prompt 'Tell me about snow and boats.' --temperature 0 --max_new_tokens 24");
  std::cout << "[ journey ] zoo generate --chat: " << answer.substr(answer.rfind('\n', answer.size() - 2) + 1);
  EXPECT_NE(answer.find(kReply), std::string::npos) << answer;
  // The last step: serve the run and ask it through the chat API, as a chat front end would.
  {
    testing::ServeProcess server("--checkpoint_path " + (dir / "ft"));
    ASSERT_GT(server.port(), 0) << server.log();
    const std::string ask =
        "import json, sys, urllib.request\n"
        "body = json.dumps({'messages': [{'role': 'user', 'content': 'Tell me about snow and stars.'}],"
        " 'max_tokens': 16, 'temperature': 0}).encode()\n"
        "r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], body, {'Content-Type': 'application/json'}))\n"
        "print(json.load(r)['choices'][0]['message']['content'])\n";
    const auto reply = testing::run_command("/usr/bin/python3 -c " + testing::shell_quoted(ask) + " http://127.0.0.1:" +
                                            std::to_string(server.port()) + "/v1/chat/completions");
    EXPECT_EQ(reply.exit_code, 0) << reply.output << server.log();
    EXPECT_NE(reply.output.find(kReply), std::string::npos) << "zoo serve's chat reply: " << reply.output;
    EXPECT_EQ(server.stop(), 0) << server.log();
  }
  // With its base moved away the checkpoint has no tokenizer beside it or its base: generate says so.
  std::filesystem::rename(dir / "base", dir / "base_moved");
  const std::string lost = run("generate --checkpoint_path " + (dir / "ft") + " --prompt 'Tell me' --max_new_tokens 2");
  EXPECT_NE(lost.find("no tokenizer files in " + (dir / "ft") + ", " + (dir / "base")), std::string::npos) << lost;
}

}  // namespace
}  // namespace zoo
