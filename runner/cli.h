// The command line, mirroring modelzoo's `python run.py {CPU|GPU} --params P
// --mode M ...`, plus zoo's own subcommands. Help text for flags that set a
// runconfig key comes from that key's schema doc.
// Defines: CliError, CliCommand, parse_cli, usage.
#pragma once

#include <yaml-cpp/yaml.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "data/create_hdf5.h"
#include "runner/checkpoint/checkpoint_diff.h"
#include "runner/convert/convert.h"
#include "runner/eval_tasks/downstream.h"
#include "runner/generate_options.h"
#include "runner/launch.h"
#include "runner/serve/server.h"
#include "runner/tools/tools.h"

namespace zoo {

class CliError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A subcommand's --help: the text goes to stdout and zoo exits 0.
class CliHelp : public CliError {
 public:
  using CliError::CliError;
};

struct CliCommand {
  enum class Kind {
    run,
    help,
    help_config,
    corpus,
    generate,
    convert,
    create_hdf5,
    convert_legacy,
    consolidate,
    checkpoint_diff,
    tool,  // runner/tools/tools.h
    launch,
    serve,
    eval_tasks
  };
  Kind kind = Kind::run;
  std::string help_format = "text";  // --help-config's: text or markdown
  std::string params_file;
  YAML::Node runconfig_overrides{YAML::NodeType::Map};  // device, mode and every flag given
  // corpus subcommand
  std::string output_dir;
  int64_t train_bytes = 0;
  int64_t eval_bytes = 0;
  // generate subcommand
  GenerateCommand generate;
  convert::ConvertCommand convert;
  data::CreateHdf5Options create_hdf5;          // zoo data create-hdf5 LMData
  std::string output_file;                      // zoo config convert-legacy IN OUT (IN in params_file)
  LaunchCommand launch;                         // zoo launch
  ckpt::CheckpointDiffCommand checkpoint_diff;  // zoo checkpoint diff
  tools::ToolCommand tool;                      // zoo checkpoint info|list|..., zoo config diff|stats
  serve::ServeCommand serve;                    // zoo serve
  eval_tasks::EvalTasksCommand eval_tasks;      // zoo eval-tasks
};

// args excludes the program name. Throws CliError with a one-line reason.
CliCommand parse_cli(const std::vector<std::string>& args);
std::string usage();

}  // namespace zoo
