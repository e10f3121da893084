// Tokenizer fixtures shared by the tokenizer and fine-tuning data tests: tiny
// SentencePiece tokenizers trained in the test, and the npm oracles run
// beside transformers.js's node_modules.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/test_util.h"

namespace zoo::testing {

inline std::string oracle_path(const std::string& name) { return source_dir() + "/tests/oracles/" + name; }

inline bool have_sentencepiece() { return python_imports("/usr/bin/python3", "sentencepiece"); }
#define ZOO_SKIP_WITHOUT_SENTENCEPIECE()   \
  if (!zoo::testing::have_sentencepiece()) \
  ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-sentencepiece is not installed"

// A tiny Llama-2-style tokenizer directory (tokenizer.model, tokenizer.json,
// tokenizer_config.json), trained by SentencePiece in the test. layout:
// "prepend" (Llama 2's Prepend normalizer) or "metaspace" (Metaspace pre-tokenizer).
inline void make_llama_tokenizer(const std::filesystem::path& dir, const std::string& layout) {
  const auto r = run_command("/usr/bin/python3 " + shell_quoted(oracle_path("tokenizer_make_sentencepiece.py")) + " " +
                             shell_quoted(dir) + " " + layout);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

// Runs the node oracle tests/oracles/<script> with `args`, from a directory
// that sees transformers.js's node_modules (js_dir: transformers_js_dir()).
inline CommandResult run_node_oracle(const std::string& js_dir, const std::string& script, const std::string& args) {
  TempDir tmp;
  std::filesystem::create_directory_symlink(std::filesystem::path(js_dir) / "node_modules", tmp / "node_modules");
  write_file(tmp / script, oracle(script));
  return run_command("node " + shell_quoted(tmp / script) + " " + args);
}

}  // namespace zoo::testing
