// What the Hugging Face conversion tests share: Python fixtures that write a
// tiny HF checkpoint (safetensors by hand, no package needed) with the
// logits of the family's forward pass, and reading back what zoo wrote.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "models/registry.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/convert/safetensors.h"
#include "runner/params/params.h"
#include "test_util.h"
#include "tests/tokenizer_fixtures.h"

namespace zoo::testing {

// Prepended to the Python fixtures.
inline const std::string kPySafetensors = zoo::testing::oracle("safetensors_prelude.py");

// Runs a Python fixture (with write_safetensors available) on `dir`, then `args`.
// The fixtures' interpreter: Debian's /usr/bin/python3 with python3-torch,
// or ZOO_TRANSFORMERS_PYTHON, a Python with torch and transformers (as on the
// GPU machines), with which each fixture's logits are also checked against
// transformers' own model of the family.
inline const char* transformers_python() {  // null when unset or empty
  const char* p = std::getenv("ZOO_TRANSFORMERS_PYTHON");
  return p && *p ? p : nullptr;
}
inline std::string fixture_python() { return transformers_python() ? transformers_python() : "/usr/bin/python3"; }
inline bool have_fixture_torch() { return python_imports(fixture_python(), "torch"); }
#define ZOO_SKIP_WITHOUT_FIXTURE_TORCH()   \
  if (!zoo::testing::have_fixture_torch()) \
  ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed"

// Loads dir/hf with transformers (its config.json's architecture, eager
// attention, float32) and compares its logits for dir/ids.bin (2 rows) with
// the fixture's dir/logits.bin. Exit 0: they agree; 3: transformers has no
// model for it here (remote code); otherwise what differs.
inline const std::string kPyTransformersCheck = zoo::testing::oracle("transformers_check.py");

inline void run_fixture(const TempDir& dir, const std::string& name, const std::string& body,
                        const std::string& args = "") {
  std::string script = write_file(dir / name, std::string(kPySafetensors) + body);
  auto r = run_command(fixture_python() + " " + script + " " + dir.path() + (args.empty() ? "" : " " + args));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  if (!transformers_python() || !std::filesystem::exists(dir / "logits.bin") ||
      !std::filesystem::exists(dir / "ids.bin") || !std::filesystem::exists(dir / "hf/config.json"))
    return;
  auto check = run_command(fixture_python() + " " + write_file(dir / "check_transformers.py", kPyTransformersCheck) +
                           " " + dir.path());
  std::cout << "[ transformers ] " << name << ": " << check.output;
  EXPECT_TRUE(check.exit_code == 0 || check.exit_code == 3) << name << ": " << check.output;
}

// The model a conversion wrote to dir/zoo, built from its params with its weights loaded.
inline std::shared_ptr<models::Model> load_converted(const TempDir& dir) {
  Params p = load_params(dir / "zoo/params.yaml", YAML::Node());
  auto model = p.model->build(torch::TensorOptions());
  ckpt::load_model_state_dict(
      *model, ckpt::load_checkpoint_file(dir / "zoo/checkpoint_0.mdl").at("model").toGenericDict(), true, "converted");
  model->eval();
  return model;
}

inline torch::Tensor read_raw(const std::string& path, torch::ScalarType type, std::vector<int64_t> shape) {
  std::string bytes = read_file(path);
  torch::Tensor t = torch::empty(shape, type);
  EXPECT_EQ(bytes.size(), t.nbytes()) << path;
  std::memcpy(t.data_ptr(), bytes.data(), std::min<size_t>(bytes.size(), t.nbytes()));
  return t;
}

// The safetensors file `back` (an export of a conversion of `original`)
// holds exactly `original`'s tensors, bit for bit, but for `buffers` (HF's
// rebuilt-at-load tensors, which an export does not write).
inline void expect_exported_bit_for_bit(const std::string& original_path, const std::string& back_path,
                                        const std::vector<std::string>& buffers = {}) {
  auto original = convert::read_safetensors(original_path);
  for (const auto& b : buffers) original.erase(b);
  auto back = convert::read_safetensors(back_path);
  EXPECT_EQ(back.size(), original.size());
  for (const auto& [k, t] : original) {
    ASSERT_TRUE(back.count(k)) << k << " did not come back";
    EXPECT_TRUE(torch::equal(t, back[k])) << k;
  }
}

// `run` must throw std::runtime_error whose message contains every `parts`.
inline void expect_refused(const std::function<void()>& run, const std::vector<std::string>& parts) {
  try {
    run();
    ADD_FAILURE() << "no error; expected one naming " << parts.front();
  } catch (const std::runtime_error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// A Hugging Face directory dir/hf as a user downloads one: a tiny Llama 2
// SentencePiece tokenizer with Llama 2's chat template, and a random Llama of
// its vocabulary (520 ids, 64 wide, 2 layers, 128 positions).
inline void make_tiny_chat_llama(const TempDir& dir) {
  make_llama_tokenizer(dir / "hf", "prepend");
  nlohmann::json config = nlohmann::json::parse(read_file(dir / "hf/tokenizer_config.json"));
  config["chat_template"] = nlohmann::json::parse(
      read_file(source_dir() + "/tests/data/chat_templates.json"))["llama_2_13b_chat"]["chat_template"];
  write_file(dir / "hf/tokenizer_config.json", config.dump());
  write_file(dir / "case.json", nlohmann::json{{"model_type", "llama"},
                                               {"rope_scaling", nullptr},
                                               {"head_dim", nullptr},
                                               {"experts", 0},
                                               {"bias", ""},
                                               {"theta", 10000.0},
                                               {"rope_parameters", false}}
                                    .dump());
  std::string make = oracle("convert_llama_make_llama.py");
  const std::string sizes = "V, C, H, G, L, I, P, eps = 40, 32, 4, 2, 2, 48, 16, 1e-6";
  ASSERT_NE(make.find(sizes), std::string::npos);
  make.replace(make.find(sizes), sizes.size(), "V, C, H, G, L, I, P, eps = 520, 64, 4, 2, 2, 128, 128, 1e-6");
  run_fixture(dir, "make_llama.py", make);
}

// make_tiny_chat_llama converted by `zoo convert` (its tokenizer beside the
// checkpoint), made once into the build tree: DIR/hf and DIR/base. "" when it
// could not be made.
inline std::string converted_tiny_chat_llama() {
  const std::filesystem::path dir = std::filesystem::path(zoo_binary()).parent_path() / "test_fixtures/serve_llama";
  if (std::filesystem::exists(dir / "base/checkpoint_0.mdl")) return dir.string();
  TempDir work;
  make_tiny_chat_llama(work);
  if (::testing::Test::HasFatalFailure()) return "";
  const auto r = run_command(zoo_binary() + " convert " + (work / "hf") + " --src-fmt hf --tgt-fmt zoo --output-dir " +
                             (work / "base"));
  if (r.exit_code != 0) return "";
  std::filesystem::create_directories(dir.parent_path());
  std::error_code lost_race;
  std::filesystem::rename(work.path(), dir, lost_race);
  return std::filesystem::exists(dir / "base/checkpoint_0.mdl") ? dir.string() : "";
}

}  // namespace zoo::testing
