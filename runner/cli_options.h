// What the subcommands' parsers share (cxxopts): parsing a subcommand's
// options, and the tokenizer flags of generate and serve.
// Defines: parse_options, add_tokenizer_options, tokenizer_spec_of, parse_generate, parse_serve,
// parse_eval_tasks, parse_config, parse_checkpoint.
#pragma once

#include <cxxopts.hpp>
#include <string>
#include <vector>

#include "runner/cli.h"

namespace zoo {

// A subcommand's options (`rest`: the arguments after its name): a malformed one is a CliError starting with
// `prog`, --help a CliHelp with `help` (the options' own when empty).
cxxopts::ParseResult parse_options(cxxopts::Options& o, const std::string& prog, const std::vector<std::string>& rest,
                                   const std::string& help = "");

// --tokenizer_type, --vocab_file, --encoder_file, --huggingface_tokenizer: the tokenizer of a checkpoint's text.
void add_tokenizer_options(cxxopts::Options& o);
text::TokenizerSpec tokenizer_spec_of(const cxxopts::ParseResult& r);

CliCommand parse_generate(const std::vector<std::string>& args);    // zoo generate
CliCommand parse_serve(const std::vector<std::string>& args);       // zoo serve
CliCommand parse_eval_tasks(const std::vector<std::string>& args);  // zoo eval-tasks
CliCommand parse_config(const std::vector<std::string>& args);      // zoo config ... (runner/cli_tools.cpp)
CliCommand parse_checkpoint(const std::vector<std::string>& args);  // zoo checkpoint ...

}  // namespace zoo
