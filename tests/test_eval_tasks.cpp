// Downstream tasks (docs/evaluation.md): task files read strictly, naming
// the line at fault, mangled files only ever errors; Python's counts of
// words and characters; and `zoo eval-tasks` on a converted tiny Llama with
// its SentencePiece tokenizer against lm-eval's formulas over a float64
// Python forward of the same weights.
#include <gtest/gtest.h>

#include <random>

#include "convert_fixtures.h"
#include "runner/eval_tasks/task_file.h"
#include "runner/eval_tasks/task_metrics.h"
#include "test_util.h"
#include "tests/tokenizer_fixtures.h"

namespace zoo {
namespace {

using nlohmann::json;
using testing::TempDir;

// The error reading `text` as a task file, "" when it reads.
std::string error_of(const std::string& text, const eval_tasks::TaskFileLimits& limits = {}) {
  TempDir dir;
  const std::string path = testing::write_file(dir / "task.jsonl", text);
  try {
    eval_tasks::read_task_file(path, 0, limits);
    return "";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path + ":", 0), 0u) << "names the file first: " << what;
    return what.substr(path.size());
  }
}

TEST(EvalTasks, TaskFilesAreReadStrictlyNamingTheLineAtFault) {
  const std::string mc = R"({"context": "Q: 2+2?", "choices": ["4", "five"], "gold": 0})";
  EXPECT_EQ(error_of(mc + "\n\n" + mc + "\n"), "");
  EXPECT_EQ(error_of(mc + "\n{\"context\": \"a\", \"choices\": [\"b\", \"c\"], \"gold\": 2}\n"),
            ":2: \"gold\": expected 0..1, got 2");
  EXPECT_EQ(
      error_of(mc + "\n{\"context\": \"a\", \"continuation\": \" b\"}\n"),
      ":2: a loglikelihood record in a multiple_choice task (the file's first record set its kind; one kind per file)");
  EXPECT_EQ(error_of(R"({"context": "a", "choices": ["b"], "gold": 0})"),
            ":1: \"choices\": expected 2 to 1024 strings, got 1");
  EXPECT_EQ(error_of(R"({"context": "a", "choices": ["b", 3], "gold": 0})"),
            ":1: \"choices\"[1]: expected a string, got an integer");
  EXPECT_EQ(
      error_of(R"({"context": "a", "choices": ["b", "c"], "gold": 0, "label": 1})"),
      ":1: unknown key \"label\" in a multiple_choice record (expected choices, context, gold, target_delimiter)");
  EXPECT_EQ(error_of(R"({"context": "a", "continuation": ""})"), ":1: \"continuation\": expected a non-empty string");
  EXPECT_EQ(error_of(R"({"text": "a b", "words": 0})"), ":1: \"words\": expected 1..9223372036854775807, got 0");
  EXPECT_EQ(error_of(R"({"context": "a", "until": [""], "target": "b"})"),
            ":1: \"until\": an empty stop string would end every generation at once");
  EXPECT_EQ(error_of(R"({"question": "a"})").substr(0, 30), ":1: cannot tell the task's kin");
  EXPECT_EQ(error_of("[1, 2]"), ":1: expected a JSON object, got a list");
  EXPECT_NE(error_of("{\"context\": \"a\",").find(":1: not a JSON object on one line"), std::string::npos);
  EXPECT_EQ(error_of("\n\n"), ": no records (expected one JSON object per line)");
  // Bounded: nesting, and a line without end is not read whole.
  EXPECT_EQ(error_of(R"({"text": "a", "x": [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]})"),
            ":1: the record nests deeper than 16 levels");
  eval_tasks::TaskFileLimits small;
  small.max_line_bytes = 64;
  EXPECT_EQ(error_of(std::string(1000, ' ') + mc, small),
            ":1: a record longer than 64 bytes (one JSON object per line expected)");
  // The kinds, and what each record holds.
  TempDir dir;
  const auto read = [&](const std::string& text) {
    return eval_tasks::read_task_file(testing::write_file(dir / "hellaswag.jsonl", text));
  };
  const auto mc_file = read(R"({"context": "Q:", "choices": ["yes", "no"], "gold": 1, "target_delimiter": ""})");
  EXPECT_EQ(mc_file.name, "hellaswag");
  EXPECT_EQ(mc_file.kind, eval_tasks::TaskKind::multiple_choice);
  EXPECT_EQ(mc_file.docs[0].continuations, (std::vector<std::string>{"yes", "no"}));
  const auto wino = read(R"({"contexts": ["The cup", "The jug"], "continuation": " broke.", "gold": 0})");
  EXPECT_EQ(wino.docs[0].contexts.size(), 2u);
  EXPECT_EQ(read(R"({"text": "a  b\n"})").docs[0].words, 3);
  EXPECT_EQ(read(R"({"text": "a b", "words": 7, "bytes": 9})").docs[0].bytes, 9);
  EXPECT_EQ(read(R"({"context": "Q", "until": "\n", "target": "A"})").docs[0].until, std::vector<std::string>{"\n"});
  EXPECT_EQ(eval_tasks::read_task_file(testing::write_file(dir / "l.jsonl", mc + "\n" + mc + "\n" + mc), 2).docs.size(),
            2u);
}

// Mangled copies of valid task files: each reads, or is an error naming the
// file; none crashes or hangs.
TEST(EvalTasks, MangledTaskFilesAreReadOrNamedNeverACrash) {
  const std::vector<std::string> valid = {
      R"({"context": "The cat sat on the", "choices": ["mat", "moon", "東京"], "gold": 0})"
      "\n"
      R"({"contexts": ["Ann lent Bo", "Bo lent Ann"], "continuation": " a pen.", "gold": 1})"
      "\n",
      R"({"text": "Wiki = text =\n more", "words": 4})"
      "\n"
      R"({"text": "b"})",
      R"({"context": "Q: 1+1?\nA:", "until": ["\n", "."], "target": "2", "max_gen_toks": 5})"
      "\n",
      R"({"context": "", "continuation": " word"})"
      "\n"
      R"({"context": "a", "continuation": " b"})"
      "\n"};
  const std::string alphabet = "{}[]\",:0123456789-e.truefalsnul \\u00\n\t\xff\xc3";
  std::mt19937 rng(11);
  TempDir dir;
  int read = 0, refused = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string text = valid[rng() % valid.size()];
    for (int edits = 1 + rng() % 3; edits > 0; --edits) {
      const size_t at = rng() % (text.size() + 1);
      switch (rng() % 4) {
        case 0:
          if (at < text.size()) text.erase(at, 1 + rng() % 8);
          break;
        case 1: text.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        case 2:
          if (at < text.size()) text[at] = alphabet[rng() % alphabet.size()];
          break;
        case 3: text.insert(at, text.substr(rng() % text.size(), rng() % 40)); break;
      }
    }
    const std::string path = testing::write_file(dir / "t.jsonl", text);
    try {
      const auto file = eval_tasks::read_task_file(path);
      ASSERT_FALSE(file.docs.empty());
      ++read;
    } catch (const std::runtime_error& e) {
      ASSERT_EQ(std::string(e.what()).rfind(path + ":", 0), 0u) << e.what();
      ++refused;
    }
  }
  std::cout << "[ mangled ] " << read << " read, " << refused << " refused with the file named\n";
  EXPECT_GT(refused, 1000);
  EXPECT_GT(read, 200);
}

// lm-eval counts words with re.split(r"\s+", text), normalizes acc_norm by
// len(choice) and strips with str.strip: Python's own answers on the same text.
TEST(EvalTasks, WordsCharactersAndStripsAreCountedAsPythonCountsThem) {
  const std::vector<std::string> texts = {"",
                                          "a",
                                          " a b ",
                                          "a\tb\n\nc",
                                          "naïve café Straße",
                                          "東京 서울\u3000Москва",
                                          "tab\x0b"
                                          "vt\x1c"
                                          "fs",
                                          "nbsp\u00a0and\u2028line\u2029para\u0085nel",
                                          "\u200bzero width is not space",
                                          "  lead",
                                          "trail\n\n",
                                          "😀 🎉"};
  TempDir dir;
  testing::write_file(dir / "texts.json", json(texts).dump());
  const auto r = testing::run_command(
      "/usr/bin/python3 -c \"import json,re,sys; t=json.load(open(sys.argv[1])); "
      "print(json.dumps([[len(re.split(r'\\s+', s)), len(s), s.strip()] for s in t]))\" " +
      (dir / "texts.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json python = json::parse(r.output);
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(eval_tasks::python_word_count(texts[i]), python[i][0].get<int64_t>()) << json(texts[i]).dump();
    EXPECT_EQ(eval_tasks::python_len(texts[i]), python[i][1].get<int64_t>()) << json(texts[i]).dump();
    EXPECT_EQ(eval_tasks::python_strip(texts[i]), python[i][2].get<std::string>()) << json(texts[i]).dump();
  }
}

// scripts/lm_eval_tasks.py on records in each dataset's published form: the
// prompts, choices and golds lm-eval's task builds, in files zoo reads.
TEST(EvalTasks, TheConverterWritesLmEvalsRequestsForEachPublishedForm) {
  TempDir dir;
  const auto convert = [&](const std::string& format, const std::string& input, const std::string& extra = "") {
    const std::string in = testing::write_file(dir / ("in/" + format), input);
    const std::string out = dir / (format + ".jsonl");
    const auto r = testing::run_command("/usr/bin/python3 " + testing::source_dir() + "/scripts/lm_eval_tasks.py " +
                                        format + " " + in + " " + out + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return eval_tasks::read_task_file(out);
  };
  const auto hella =
      convert("hellaswag", json{{"ind", 4},
                                {"activity_label", "Removing ice from car"},
                                {"ctx_a", "Then, the man writes over the snow covering the window of a car."},
                                {"ctx_b", "a woman wearing winter clothes"},
                                {"endings", {"stands [title] Step 1.", "x", "y", "z"}},
                                {"label", "3"}}
                                   .dump() +
                               "\n");
  EXPECT_EQ(hella.docs[0].contexts[0],
            "Removing ice from car: Then, the man writes over the snow covering the window of a "
            "car. A woman wearing winter clothes");
  EXPECT_EQ(hella.docs[0].choices[0], "stands. Step 1.");
  EXPECT_EQ(hella.docs[0].gold, 3);
  const auto arc = convert(
      "arc",
      json{{"id", "Q1"},
           {"answerKey", "B"},
           {"question",
            {{"stem", "Which is a gas?"},
             {"choices", {{{"text", "ice"}, {"label", "A"}}, {{"text", "steam"}, {"label", "B"}}}}}}}
              .dump() +
          "\n" +
          json{{"question", "2+2?"}, {"answerKey", "1"}, {"choices", {{"text", {"4", "5"}}, {"label", {"1", "2"}}}}}
              .dump() +
          "\n");
  EXPECT_EQ(arc.docs[0].contexts[0], "Question: Which is a gas?\nAnswer:");
  EXPECT_EQ(arc.docs[0].continuations[1], " steam");
  EXPECT_EQ(arc.docs[0].gold, 1);
  EXPECT_EQ(arc.docs[1].gold, 0);
  testing::write_file(dir / "labels.lst", "1\n");
  const auto piqa =
      convert("piqa", json{{"goal", "Dry wet shoes"}, {"sol1", "Use an oven."}, {"sol2", "Stuff paper in."}}.dump(),
              " --labels " + (dir / "labels.lst"));
  EXPECT_EQ(piqa.docs[0].contexts[0], "Question: Dry wet shoes\nAnswer:");
  EXPECT_EQ(piqa.docs[0].gold, 1);
  const auto wino = convert("winogrande", json{{"sentence", "Ian put the cup on the box but _ was too small."},
                                               {"option1", "the cup"},
                                               {"option2", "the box"},
                                               {"answer", "2"}}
                                              .dump());
  EXPECT_EQ(wino.docs[0].contexts, (std::vector<std::string>{"Ian put the cup on the box but the cup",
                                                             "Ian put the cup on the box but the box"}));
  EXPECT_EQ(wino.docs[0].continuations[0], " was too small.");
  EXPECT_EQ(wino.docs[0].gold, 1);
  const auto lambada = convert("lambada", json{{"text", "He looked at the sky and saw the moon"}}.dump());
  EXPECT_EQ(lambada.kind, eval_tasks::TaskKind::loglikelihood);
  EXPECT_EQ(lambada.docs[0].contexts[0], "He looked at the sky and saw the");
  EXPECT_EQ(lambada.docs[0].continuations[0], " moon");
  const std::string page1 =
      " = Valkyria = \n \n Senjō no Valkyria 3 @-@ 2011 , a game ( 2011 ) . \n \n = = Gameplay = = \n x \n";
  const auto wiki = convert("wikitext", " \n" + page1 + " = Tower Building = \n \n It 's tall . \n");
  ASSERT_EQ(wiki.docs.size(), 2u);
  EXPECT_EQ(wiki.docs[0].text, "\n= Valkyria =\n\nSenjō no Valkyria 3-2011, a game (2011).\n\n== Gameplay ==\nx\n");
  EXPECT_EQ(wiki.docs[0].words, 24) << "the page's words before detokenizing, as re.split counts them";
  EXPECT_EQ(wiki.docs[0].bytes, static_cast<int64_t>((" \n" + page1).size()));
  // A file of another form is named, not converted into nonsense.
  const auto r =
      testing::run_command("/usr/bin/python3 " + testing::source_dir() + "/scripts/lm_eval_tasks.py lambada " +
                           (dir / "in/arc") + " " + (dir / "x.jsonl"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("record 1 has no \"text\" (is this the right FORMAT?)"), std::string::npos) << r.output;
}

// Words of the tiny tokenizer's training text, so that texts split into its pieces.
const std::vector<std::string> kWords = {"the",   "quick", "brown", "fox",   "jumps", "over",
                                         "lazy",  "dog",   "hello", "world", "data",  "model",
                                         "train", "token", "piece", "naïve", "café",  "Straße"};

std::string sentence(std::mt19937& rng, int words) {
  std::string s;
  for (int i = 0; i < words; ++i) s += (i ? " " : "") + kWords[rng() % kWords.size()];
  return s;
}

TEST(EvalTasks, MetricsEqualLmEvalsFormulasOverAFloat64Forward) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  ZOO_SKIP_WITHOUT_SENTENCEPIECE();
  const std::string model = testing::converted_tiny_chat_llama();
  ASSERT_FALSE(model.empty()) << "the tiny Llama fixture could not be made";
  TempDir dir;
  std::mt19937 rng(5);
  std::string mc, wino, ll, rolling;
  for (int i = 0; i < 6; ++i) {
    json choices = json::array();
    for (int c = 0; c < 4; ++c) choices.push_back(sentence(rng, 1 + rng() % 4));
    json doc = {
        {"context", sentence(rng, 3 + rng() % 6) + (i == 1 ? " " : "")}, {"choices", choices}, {"gold", rng() % 4}};
    if (i == 2) doc["target_delimiter"] = ": ";
    mc += doc.dump() + "\n";
  }
  for (int i = 0; i < 3; ++i)
    wino += json{{"contexts", {sentence(rng, 4), sentence(rng, 5)}},
                 {"continuation", " " + sentence(rng, 3)},
                 {"gold", i % 2}}
                .dump() +
            "\n";
  ll += json{{"context", ""}, {"continuation", sentence(rng, 4)}}.dump() + "\n";
  for (int i = 0; i < 3; ++i)
    ll += json{{"context", sentence(rng, 6)}, {"continuation", " " + sentence(rng, 1 + i)}}.dump() + "\n";
  // lm-eval moves a context's trailing spaces onto the continuation before tokenizing.
  ll += json{{"context", sentence(rng, 5) + "  "}, {"continuation", sentence(rng, 2)}}.dump() + "\n";
  rolling += json{{"text", sentence(rng, 12)}}.dump() + "\n";
  rolling +=
      json{{"text", sentence(rng, 170) + "\n\n" + sentence(rng, 40)}, {"words", 200}, {"bytes", 1500}}.dump() + "\n";
  testing::write_file(dir / "tasks/choice.jsonl", mc);
  testing::write_file(dir / "tasks/wino.jsonl", wino);
  testing::write_file(dir / "tasks/lambada.jsonl", ll);
  testing::write_file(dir / "tasks/wiki.jsonl", rolling);
  json gen_contexts = json::array();
  for (int i = 0; i < 10; ++i) gen_contexts.push_back(sentence(rng, 4 + i));
  testing::write_file(dir / "gen_contexts.json", gen_contexts.dump());
  std::filesystem::create_directories(dir / "hf");
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.model"})
    std::filesystem::copy(model + "/hf/" + f, dir / ("hf/" + std::string(f)));
  testing::run_fixture(dir, "reference.py",
                       testing::oracle("llama_float64_prelude.py") + testing::oracle("eval_tasks_reference.py"));
  ASSERT_FALSE(HasFatalFailure());
  const json expected = json::parse(testing::read_file(dir / "expected.json"));

  std::string tasks;
  for (const char* t : {"choice", "wino", "lambada", "wiki", "gen"})
    tasks += (tasks.empty() ? "" : ",") + (dir / ("tasks/" + std::string(t) + ".jsonl"));
  const auto r = testing::run_command(testing::zoo_binary() + " eval-tasks --checkpoint_path " + model +
                                      "/base --tasks " + tasks + " --batch_size 3 --output_json " + (dir / "zoo.json"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::cout << r.output.substr(r.output.find("choice ")) << "[ reference ] " << expected.dump() << "\n"
            << testing::read_file(dir / "tasks/gen.jsonl");
  const json got = json::parse(testing::read_file(dir / "zoo.json"))["results"];
  ASSERT_EQ(got.size(), 5u) << got.dump();
  for (const auto& [task, metrics] : expected["metrics"].items()) {
    ASSERT_TRUE(got.contains(task)) << task;
    EXPECT_EQ(got[task].size(), metrics.size()) << task << ": " << got[task].dump();
    // Decisions (argmax over choices, greedy tokens) no float32 rounding could flip: their margins in float64.
    EXPECT_GT(expected["margins"].value(task, 1.0), 1e-4) << task << ": a decision too close to call";
    for (const auto& [name, value] : metrics.items()) {
      const double want = value.get<double>(), have = got[task].value(name, std::nan(""));
      if (name == "acc" || name == "acc_norm" || name == "exact_match") EXPECT_EQ(have, want) << task << "/" << name;
      else EXPECT_NEAR(have, want, 1e-4 * std::abs(want)) << task << "/" << name;
    }
  }
  // The made-up targets: exact match on one generation of the ten.
  EXPECT_DOUBLE_EQ(expected["metrics"]["gen"]["exact_match"].get<double>(), 0.1);
  EXPECT_GT(expected["metrics"]["wiki"]["word_perplexity"].get<double>(), 1.0);
}

// The params section and modelzoo's Trainer form of it (the EvalTasks
// callback) read alike, are checked at --validate_only, and score their tasks
// with every evaluation into results.csv.
TEST(EvalTasks, TheSectionAndItsTrainerCallbackScoreWithEveryEvaluation) {
  TempDir dir;
  testing::write_small_corpus(dir / "data");
  testing::write_file(dir / "tasks/choice.jsonl",
                      R"({"context": "The cat sat on the", "choices": ["mat.", "sky, far away."], "gold": 0})"
                      "\n"
                      R"({"context": "Once upon a", "choices": ["time", "table"], "gold": 0})"
                      "\n");
  testing::write_file(dir / "tasks/wiki.jsonl",
                      json{{"text", std::string(3, ' ') + "It was the best of times, it was the "
                                                          "worst of times, it was the age of wisdom."}}
                              .dump() +
                          "\n");
  const std::string section = "eval_tasks:\n  tasks: [" + (dir / "tasks/choice.jsonl") + ", " +
                              (dir / "tasks/wiki.jsonl") + "]\n  batch_size: 2\n  limit: 5\n";
  const std::string legacy =
      testing::write_file(dir / "legacy.yaml", testing::tiny_params_yaml(dir / "data", dir / "m") + section);
  const std::string trainer = dir / "trainer.yaml";
  auto r = testing::run_command(testing::zoo_binary() + " config convert-legacy " + legacy + " " + trainer);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const YAML::Node callbacks = YAML::LoadFile(trainer)["trainer"]["init"]["callbacks"];
  ASSERT_TRUE(callbacks.IsSequence()) << testing::read_file(trainer);
  ASSERT_EQ(callbacks.size(), 1u) << "one EvalTasks entry with every key: " << testing::read_file(trainer);
  EXPECT_EQ(callbacks[0]["EvalTasks"]["tasks"].size(), 2u);
  EXPECT_EQ(callbacks[0]["EvalTasks"]["limit"].as<int>(), 5);
  YAML::Emitter a, b;
  a << load_params(legacy, YAML::Node()).resolved();
  b << load_params(trainer, YAML::Node()).resolved();
  EXPECT_EQ(std::string(a.c_str()), b.c_str());

  // Both forms score the same tasks after the eval loss (no checkpoint yet: the seeded initial model).
  std::map<std::string, std::string> metric_lines;
  for (const auto& [form, file] : {std::pair{"legacy", legacy}, std::pair{"trainer", trainer}}) {
    r = testing::run_command(testing::zoo_binary() + " CPU --params " + file + " --mode eval --eval_steps 2 -o " +
                             (dir / form));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (size_t at = r.output.find("Metric: "); at != std::string::npos; at = r.output.find("Metric: ", at + 1))
      metric_lines[form] += r.output.substr(at, r.output.find('\n', at) - at) + "\n";
  }
  EXPECT_EQ(metric_lines["legacy"], metric_lines["trainer"]);
  for (const char* name : {"eval/choice/acc", "eval/choice/acc_norm", "eval/wiki/word_perplexity",
                           "eval/wiki/byte_perplexity", "eval/wiki/bits_per_byte"})
    EXPECT_NE(metric_lines["legacy"].find(std::string("Metric: ") + name + " = "), std::string::npos)
        << metric_lines["legacy"];
  const std::string csv = testing::read_file(dir / "legacy/eval/results.csv");
  for (const char* column : {",eval/choice/acc,", ",eval/choice/acc_norm,", ",eval/wiki/bits_per_byte,"})
    EXPECT_NE(csv.substr(0, csv.find('\n')).find(column), std::string::npos) << csv;

  // Checked before anything runs, at the line of the key.
  const std::string missing =
      testing::write_file(dir / "missing.yaml", testing::tiny_params_yaml(dir / "data", dir / "m") +
                                                    "eval_tasks:\n  tasks: [nowhere.jsonl]\n");
  r = testing::run_command(testing::zoo_binary() + " CPU --params " + missing + " --mode eval --validate_only");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("missing.yaml:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("eval_tasks.tasks"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("nowhere.jsonl: no such task file"), std::string::npos) << r.output;
  const std::string bad_record =
      testing::write_file(dir / "tasks/bad.jsonl", R"({"context": "a", "choices": ["b"], "gold": 0})");
  const std::string modelzoo_callback = testing::write_file(
      dir / "eeh.yaml", "trainer:\n  init:\n    model_dir: " + (dir / "m") +
                            "\n    model:\n      name: gpt2\n"
                            "    callbacks:\n      - EleutherEvalHarness:\n          eeh_args: {tasks: hellaswag}\n");
  const std::string typo = testing::write_file(
      dir / "typo.yaml", testing::read_file(trainer).replace(testing::read_file(trainer).find("limit:"), 6, "limt:"));
  r = testing::run_command(testing::zoo_binary() + " CPU --params " + typo + " --mode eval --validate_only");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("trainer.init.callbacks.0.EvalTasks.limt: unknown key (did you mean 'limit'?)"),
            std::string::npos)
      << r.output;
  r = testing::run_command(testing::zoo_binary() + " CPU --params " + modelzoo_callback +
                           " --mode eval --validate_only");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("EleutherEvalHarness runs lm-eval's tasks by name; zoo scores task files on disk"),
            std::string::npos)
      << r.output;
  const std::string with_bad =
      testing::write_file(dir / "bad.yaml", testing::tiny_params_yaml(dir / "data", dir / "m") +
                                                "eval_tasks:\n  tasks: [" + bad_record + "]\n");
  r = testing::run_command(testing::zoo_binary() + " CPU --params " + with_bad + " --mode eval -o " + (dir / "d"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find(bad_record + ":1: \"choices\": expected 2 to 1024 strings, got 1"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("Avg Eval Loss"), std::string::npos) << "refused before evaluating: " << r.output;
}

}  // namespace
}  // namespace zoo
