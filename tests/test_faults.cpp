// Faults a hostile user finds: poisoned weights, two runs on one model_dir,
// files that are not files, looping links, damaged gzip input, checkpoints
// Python saved again, exports that do not fit, models too large, and
// messages that named no file. Each ends in an error naming the file, flag
// or key, or is handled as the README says, and nothing the user had is lost.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "convert_fixtures.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/convert/convert.h"
#include "runner/model_dir_lock.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::run_command;
using zoo::testing::TempDir;
using zoo::testing::TinyRun;

namespace {

// The tiny run with `learning_rate` in place of its schedule.
std::string with_learning_rate(const TinyRun& run, const std::string& lr) {
  std::string y = zoo::testing::read_file(run.params);
  const size_t from = y.find("  learning_rate:\n"), to = y.find("runconfig:");
  y.replace(from, to - from, "  learning_rate: " + lr + "\n");
  return zoo::testing::write_file(run.dir / "lr.yaml", y);
}

}  // namespace

// A step that leaves NaN or inf in the weights is never saved as a
// checkpoint: the run stops naming the step, a tensor and the newest good
// checkpoint, which stays the one a restart autoloads.
TEST(Faults, NonFiniteWeightsAreNeverSavedAsACheckpoint) {
  TinyRun run("  checkpoint_steps: 1\n");
  ASSERT_EQ(run.zoo("--mode train --max_steps 2").exit_code, 0);
  const std::string poisoned = with_learning_rate(run, "1.0e+300");  // inf in float32: the first update is inf or NaN
  auto r = run_command(zoo::testing::zoo_binary() + " CPU --params " + poisoned + " --mode train --max_steps 4");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string m = run.dir / "m";
  EXPECT_NE(r.output.find("step 3: the model's weights hold NaN or inf ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no checkpoint was written; the newest one stays " + m + "/checkpoint_2.mdl"),
            std::string::npos)
      << r.output;
  const auto kept = ckpt::list_checkpoints(m);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept.back().step, 2);
  EXPECT_EQ(run.zoo("--mode train --max_steps 3").exit_code, 0);  // the sane params go on from step 2
}

// A training run owns its model_dir: a second one started beside it stops
// at once naming the first one's pid, writes nothing there, and the lock
// goes with the process, killed or not. Evaluations may run alongside.
TEST(Faults, TwoTrainingRunsOnOneModelDirAreRefused) {
  TinyRun run;
  const std::string m = run.dir / "m";
  std::filesystem::create_directories(m);
  const std::string first = run.dir / "first.pid";
  ASSERT_EQ(
      run_command("(" + zoo::testing::zoo_binary() + " CPU --params " + run.params +
                  " --mode train --max_steps 100000 > " + (run.dir / "first.log") + " 2>&1 & echo $! > " + first + ")")
          .exit_code,
      0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (zoo::testing::read_file(m + "/zoo_run.lock").find("pid ") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const pid_t pid = std::stoi(zoo::testing::read_file(first));
  struct StopAtExit {  // never leave the first run training if an assertion below ends the test early
    pid_t pid;
    ~StopAtExit() {
      if (pid > 0) ::kill(pid, SIGKILL);
    }
  } stop_first{pid};
  auto second = run.zoo("--mode train --max_steps 2");
  EXPECT_EQ(second.exit_code, 1) << second.output;
  EXPECT_NE(second.output.find("model_dir " + m + " is in use by another zoo run (pid " + std::to_string(pid) + " on "),
            std::string::npos)
      << second.output;
  const auto logs = std::distance(std::filesystem::directory_iterator(m + "/zoo_logs"), {});
  EXPECT_EQ(logs, 1) << "the refused run wrote into the model_dir";
  ::kill(pid, SIGKILL);
  stop_first.pid = -1;  // its number may go to another process once it has gone
  bool freed = false;
  for (int i = 0; i < 200 && !freed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    freed = ::kill(pid, 0) != 0;
  }
  ASSERT_TRUE(freed);
  auto third = run.zoo("--mode train --max_steps 2 --model_dir " + (run.dir / "m"));
  EXPECT_EQ(third.exit_code, 0) << third.output;
  // The lock in this process: evaluations go ahead, training does not.
  lock_model_dir(m, "train");
  EXPECT_EQ(run.zoo("--mode eval --eval_steps 1").exit_code, 0);
  EXPECT_EQ(run.zoo("--mode train --max_steps 4").exit_code, 1);
}

// A FIFO as --checkpoint_path would block the read forever: refused by name.
TEST(Faults, ACheckpointPathThatIsAPipeIsRefused) {
  TinyRun run;
  const std::string fifo = run.dir / "ckpt.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto r = run_command("timeout 120 " + zoo::testing::zoo_binary() + " CPU --params " + run.params +
                       " --mode eval --checkpoint_path " + fifo);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(fifo + ": not a regular file (a pipe or device)"), std::string::npos) << r.output;
}

// A checkpoint name that is a link to itself is passed over with a warning,
// as dangling links are: eval_all evaluates the real checkpoints and a
// restart resumes from the newest one.
TEST(Faults, ALoopingCheckpointLinkIsPassedOver) {
  TinyRun run("  checkpoint_steps: 2\n");
  ASSERT_EQ(run.zoo("--mode train --max_steps 4").exit_code, 0);
  const std::string loop = run.dir / "m/checkpoint_6.mdl";
  std::filesystem::create_symlink("checkpoint_6.mdl", loop);
  auto all = run.zoo("--mode eval_all --eval_steps 1");
  EXPECT_EQ(all.exit_code, 0) << all.output;
  EXPECT_NE(all.output.find(loop + ": ignored; it is named as a checkpoint but cannot be read"), std::string::npos)
      << all.output;
  EXPECT_NE(all.output.find("checkpoint_2.mdl"), std::string::npos);
  EXPECT_NE(all.output.find("checkpoint_4.mdl"), std::string::npos);
  auto resumed = run.zoo("--mode train --max_steps 6");
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("checkpoint_4.mdl"), std::string::npos) << resumed.output;
  EXPECT_TRUE(std::filesystem::is_symlink(loop)) << "the user's link is left as it was";
}

// A .txt.gz cut short, or a .gz that is no gzip at all, is an error naming
// the file, not a data set of whatever bytes came out.
TEST(Faults, DamagedGzipInputToCreateHdf5IsAnError) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 4000; ++i) text += "line " + std::to_string(i * 7919 % 10007) + " of a document\n";
  zoo::testing::write_file(dir / "full/doc.txt", text);
  ASSERT_EQ(run_command("gzip -k " + (dir / "full/doc.txt")).exit_code, 0);
  const std::string gz = zoo::testing::read_file(dir / "full/doc.txt.gz");
  zoo::testing::write_file(dir / "cut/doc.txt.gz", gz.substr(0, gz.size() / 2));
  zoo::testing::write_file(dir / "plain/doc.txt.gz", text);
  auto create = [&](const std::string& in) {
    return run_command(zoo::testing::zoo_binary() + " data create-hdf5 LMData --input_dir " + (dir / in) +
                       " --output_dir " + (dir / (in + "_out")) +
                       " --tokenizer_type ByteTokenizer --eos_id 0 --max_seq_length 64");
  };
  std::filesystem::remove(dir / "full/doc.txt");
  EXPECT_EQ(create("full").exit_code, 0);
  auto cut = create("cut");
  EXPECT_EQ(cut.exit_code, 1) << cut.output;
  EXPECT_NE(cut.output.find(dir / "cut/doc.txt.gz: the gzip data ends early"), std::string::npos) << cut.output;
  auto plain = create("plain");
  EXPECT_EQ(plain.exit_code, 1) << plain.output;
  EXPECT_NE(plain.output.find(dir / "plain/doc.txt.gz: not gzip data"), std::string::npos) << plain.output;
}

// Past a file size limit (ulimit -f) a checkpoint write fails as on a full
// disk: exit 1 naming the file and the reason, no half-written file left,
// instead of a kill by SIGXFSZ without a word.
TEST(Faults, AFileSizeLimitIsReportedAsAWriteError) {
  TinyRun run("  checkpoint_steps: 2\n");
  auto r = run_command("bash -c 'ulimit -f 64; exec " + zoo::testing::zoo_binary() + " CPU --params " + run.params +
                       " --mode train --max_steps 2'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(run.dir / "m/checkpoint_2.mdl"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("write failed (File too large)"), std::string::npos) << r.output;
  for (const auto& e : std::filesystem::directory_iterator(run.dir / "m"))
    EXPECT_NE(e.path().extension(), ".tmp") << e.path();
}

// An export whose --config does not describe the checkpoint's weights is
// refused naming a tensor and both shapes, and an export never writes into a
// directory that holds files.
TEST(Faults, ExportsCheckTheConfigAndNeverOverwrite) {
  TinyRun run("  checkpoint_steps: 1\n");
  ASSERT_EQ(run.zoo("--mode train --max_steps 1").exit_code, 0);
  const std::string checkpoint = run.dir / "m/checkpoint_1.mdl";
  std::string wide = zoo::testing::read_file(run.params);
  wide.replace(wide.find("hidden_size: 32"), 15, "hidden_size: 64");
  const std::string wide_params = zoo::testing::write_file(run.dir / "wide.yaml", wide);
  zoo::testing::expect_refused(
      [&] {
        convert::run_convert({checkpoint, "gpt2", "zoo", "hf", wide_params, run.dir / "wide_export"});
      },
      {checkpoint + ": ", "has shape [256, 32] where --config gives it [256, 64]"});
  EXPECT_FALSE(std::filesystem::exists(run.dir / "wide_export/config.json"));
  convert::run_convert({checkpoint, "gpt2", "zoo", "hf", std::nullopt, run.dir / "export"});
  const std::string config = zoo::testing::read_file(run.dir / "export/config.json");
  zoo::testing::expect_refused(
      [&] {
        convert::run_convert({checkpoint, "gpt2", "zoo", "hf", std::nullopt, run.dir / "export"});
      },
      {"--output-dir " + (run.dir / "export") + " already holds files"});
  EXPECT_EQ(zoo::testing::read_file(run.dir / "export/config.json"), config);
}

// BERT masked-LM HDF5 files whose labels mask nothing would train at loss 0
// and exit 0: refused naming the file and sample, as the GPT processors
// refuse a batch with nothing to learn; a negative label other than -100
// (ignore_index) is named, not taken as unmasked.
TEST(Faults, BertHdf5LabelsThatMaskNothingOrAreNotIdsAreRefused) {
  if (!zoo::testing::have_h5py()) ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with h5py is not installed";
  TempDir dir;
  const std::string script = zoo::testing::write_file(dir / "w.py", zoo::testing::oracle("faults_write_hdf5.py"));
  for (const int fill : {-100, -1, -101}) {
    const std::string data = dir / ("fill" + std::to_string(-fill));
    ASSERT_EQ(run_command("/usr/bin/python3 " + script + " " + data + " " + std::to_string(fill)).exit_code, 0);
    const std::string e = zoo::testing::first_batch_error("{data_processor: BertHDF5DataProcessor, data_dir: " + data +
                                                          ", batch_size: 4, shuffle: false}");
    EXPECT_NE(e.find(data + "/part.h5, sample "), std::string::npos) << e;
    if (fill == -100)
      EXPECT_NE(e.find("no token is masked (every label is -100), so nothing counts toward the masked-LM loss"),
                std::string::npos)
          << e;
    else
      EXPECT_NE(e.find("sample 1: label " + std::to_string(fill) + " at slot 3: expected a token id, or -100"),
                std::string::npos)
          << e;
  }
}

// A zoo checkpoint that Python loaded and saved again (torch.load then
// torch.save) resumes with its whole state, to the same losses as the run
// that never stopped; a weight edited in Python no longer matches the
// stored checksum and loading stops naming the file; a file without the
// checksum loads with a warning that it cannot be verified.
TEST(Faults, CheckpointsSavedAgainByPythonKeepTheirStateAndChecksum) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  TinyRun run("  checkpoint_steps: 2\n");
  auto straight = run.zoo("--mode train --max_steps 4 --model_dir " + (run.dir / "straight"));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const std::vector<double> last = zoo::testing::train_losses(straight.output);  // step 4's (log_steps 1000)
  ASSERT_EQ(last.size(), 1u) << straight.output;
  ASSERT_EQ(run.zoo("--mode train --max_steps 2").exit_code, 0);
  const std::string script = zoo::testing::write_file(run.dir / "resave.py", zoo::testing::oracle("faults_resave.py"));
  auto py = run_command("/usr/bin/python3 " + script + " " + (run.dir / "m/checkpoint_2.mdl") + " " + run.dir.path());
  ASSERT_EQ(py.exit_code, 0) << py.output;
  auto resumed = run.zoo("--mode train --max_steps 4 --model_dir " + (run.dir / "resaved"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(zoo::testing::train_losses(resumed.output), last) << resumed.output;
  EXPECT_EQ(resumed.output.find("cannot be verified"), std::string::npos) << resumed.output;
  const std::string edited = run.dir / "edited/checkpoint_2.mdl";
  auto refused = run.zoo("--mode eval --checkpoint_path " + edited);
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find(edited + ": checksum mismatch"), std::string::npos) << refused.output;
  const std::string unsummed = run.dir / "unsummed/checkpoint_2.mdl";
  auto unverified = run.zoo("--mode train --max_steps 4 --model_dir " + (run.dir / "unsummed"));
  EXPECT_EQ(unverified.exit_code, 0) << unverified.output;
  EXPECT_NE(unverified.output.find(unsummed + ": its contents cannot be verified: it was saved again by Python"),
            std::string::npos)
      << unverified.output;
  EXPECT_EQ(zoo::testing::train_losses(unverified.output), last);
}

// Messages that named no file: an absurd --max_seq_length (was
// std::bad_alloc), a torch.save'd list given as a checkpoint (was "expected a
// dict of tensors"), and eval_all over weights whose loss is NaN (named the
// step, and stopped the other checkpoints' evaluations).
TEST(Faults, ErrorsNameTheFileOrFlag) {
  TinyRun run("  checkpoint_steps: 2\n");
  auto hdf5 = run_command(zoo::testing::zoo_binary() + " data create-hdf5 LMData --input_dir " +
                          (run.dir / "data/train") + " --output_dir " + (run.dir / "h5") +
                          " --tokenizer_type ByteTokenizer --eos_id 0"
                          " --max_seq_length 9999999999999");
  EXPECT_EQ(hdf5.exit_code, 1) << hdf5.output;
  EXPECT_NE(hdf5.output.find("--max_seq_length 9999999999999 is over 1048576 tokens per sample"), std::string::npos)
      << hdf5.output;

  ASSERT_EQ(run.zoo("--mode train --max_steps 4").exit_code, 0);
  const std::string m = run.dir / "m";
  c10::impl::GenericDict poisoned = ckpt::load_checkpoint_file(m + "/checkpoint_2.mdl");
  c10::impl::GenericDict weights = poisoned.at("model").toGenericDict();
  weights.begin()->value().toTensor().fill_(std::nan(""));
  ckpt::save_checkpoint_file(m + "/checkpoint_2.mdl", poisoned);
  auto all = run.zoo("--mode eval_all --eval_steps 1");
  EXPECT_EQ(all.exit_code, 1) << all.output;
  EXPECT_NE(all.output.find("evaluating " + m + "/checkpoint_2.mdl: loss is nan"), std::string::npos) << all.output;
  EXPECT_NE(zoo::testing::read_file(m + "/eval/results.csv").find(m + "/checkpoint_4.mdl,4,"), std::string::npos)
      << "the checkpoint after the NaN one was not evaluated";

  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  const std::string list = run.dir / "list.pt";
  ASSERT_EQ(run_command("/usr/bin/python3 -c \"import torch; torch.save([torch.ones(2)], '" + list + "')\"").exit_code,
            0);
  auto r = run.zoo("--mode eval --checkpoint_path " + list);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(list + ": holds a Python list, not a checkpoint"), std::string::npos) << r.output;
}

// A model too large for the memory the process may have: the error names the
// params file, the model, its parameter count and the memory it needs, not
// only LibTorch's allocator text.
TEST(Faults, AModelTooLargeForMemoryIsNamedWithItsSize) {
  TinyRun run;
  std::string y = zoo::testing::read_file(run.params);
  y.replace(y.find("hidden_size: 32"), 15, "hidden_size: 32768");  // 4 GiB per attention matrix
  const std::string big = zoo::testing::write_file(run.dir / "big.yaml", y);
  auto r = run_command("bash -c 'ulimit -v 6000000; exec " + zoo::testing::zoo_binary() + " CPU --params " + big +
                       " --mode train --max_steps 1'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find(big + ": model (gpt2): its "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("parameters need 32.1 GiB in float32 on cpu"), std::string::npos) << r.output;
}

// zoo generate says when it crops a prompt longer than the model's
// positions, and refuses a --max_new_tokens no one means.
TEST(Faults, GenerateSaysWhenItCropsAndRefusesAbsurdLengths) {
  TinyRun run("  checkpoint_steps: 1\n");
  ASSERT_EQ(run.zoo("--mode train --max_steps 1").exit_code, 0);
  const std::string generate = zoo::testing::zoo_binary() + " generate --checkpoint_path " + (run.dir / "m") +
                               " --seed 1 --prompt 'a prompt of forty bytes, more than 32 ok'";
  auto cropped = run_command(generate + " --max_new_tokens 2");
  EXPECT_EQ(cropped.exit_code, 0) << cropped.output;
  EXPECT_NE(cropped.output.find("the prompt's 40 tokens are more than the model's 32 positions: generation sees its "
                                "last 32"),
            std::string::npos)
      << cropped.output;
  auto absurd = run_command(generate + " --max_new_tokens 9000000000000000000");
  EXPECT_EQ(absurd.exit_code, 1) << absurd.output;
  EXPECT_NE(absurd.output.find("--max_new_tokens 9000000000000000000 is over 1000000"), std::string::npos)
      << absurd.output;
}

// A config.json field of the wrong type names the file and the field's JSON
// path, not only nlohmann's "type must be number, but is string".
TEST(Faults, AMistypedConfigJsonFieldIsNamed) {
  TinyRun run("  checkpoint_steps: 1\n");
  ASSERT_EQ(run.zoo("--mode train --max_steps 1").exit_code, 0);
  convert::run_convert({run.dir / "m/checkpoint_1.mdl", "gpt2", "zoo", "hf", std::nullopt, run.dir / "hf"});
  nlohmann::json config = nlohmann::json::parse(zoo::testing::read_file(run.dir / "hf/config.json"));
  config["n_embd"] = "32";
  zoo::testing::write_file(run.dir / "hf/config.json", config.dump());
  zoo::testing::expect_refused(
      [&] {
        convert::run_convert({run.dir / "hf", "", "hf", "zoo", std::nullopt, run.dir / "back"});
      },
      {run.dir / "hf/config.json", "n_embd: type must be number, but is string (got \"32\")"});
}
