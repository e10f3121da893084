// Downstream task files: JSON Lines in a schema close to lm-eval's request
// types (docs/evaluation.md). A file holds one task, named by its stem; the
// kind is read from the first record's keys and every record must be of it.
// No LibTorch here. Defines: TaskKind, TaskDoc, TaskFile, read_task_file,
// same_named_tasks, python_len, python_word_count, is_python_space,
// python_strip, python_rstrip.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zoo::eval_tasks {

enum class TaskKind {
  multiple_choice,  // context + one continuation per choice; acc, acc_norm
  loglikelihood,    // context + continuation; loglikelihood, perplexity, acc (greedy)
  rolling,          // a whole document, scored in context-sized windows; word/byte perplexity, bits_per_byte
  generate_until,   // greedy continuation of context, cut at `until`; exact_match against target
};
const char* kind_name(TaskKind kind);

// One record. Which fields are set depends on the kind.
struct TaskDoc {
  // multiple_choice: one context for every continuation, or (WinoGrande's
  // partial scoring) one context per choice and a single continuation.
  std::vector<std::string> contexts;
  std::vector<std::string> continuations;
  std::vector<std::string> choices;  // the choice texts without delimiter: acc_norm divides by their length
  int64_t gold = 0;
  // rolling: the document, and lm-eval's counts for its per-word and per-byte figures
  // (of the text as given, unless the record gives those of the original).
  std::string text;
  int64_t words = 0, bytes = 0;
  // generate_until (contexts[0] is the prompt)
  std::vector<std::string> until;
  std::string target;
  int64_t max_gen_toks = 0;  // 0: the task runner's default
  int64_t line = 0;          // where it was read, for messages
};

struct TaskFile {
  std::string path, name;
  TaskKind kind = TaskKind::multiple_choice;
  std::vector<TaskDoc> docs;
};

// Limits on what a task file may hold: it is downloaded data, read before a
// run that may last days.
struct TaskFileLimits {
  size_t max_line_bytes = size_t(64) << 20;
  int max_json_depth = 16;
  size_t max_choices = 1024;
  int64_t max_docs = 10'000'000;
};

// Reads `path` (all of it, or its first `limit` records when limit > 0).
// Throws std::runtime_error "PATH:LINE: what was expected" for anything
// that is not a record of the schema.
TaskFile read_task_file(const std::string& path, int64_t limit = 0, const TaskFileLimits& limits = {});

// "A and B are both task 'x' ..." for the first two of `paths` whose stems
// (their task names) are equal; "" when every name is its own.
std::string same_named_tasks(const std::vector<std::string>& paths);

// Python's str.isspace for one code point (what lm-eval's str.rstrip and re's \s see).
bool is_python_space(char32_t cp);
// len(text) of Python: code points.
int64_t python_len(std::string_view utf8);
// lm-eval's word count: len(re.split(r"\s+", text)).
int64_t python_word_count(std::string_view utf8);
// Text without the whitespace Python's str.strip (str.rstrip: at the end only) removes.
std::string python_strip(const std::string& text);
std::string python_rstrip(const std::string& text);

}  // namespace zoo::eval_tasks
