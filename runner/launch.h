// `zoo launch`: starts this machine's ranks of a data-parallel job, for users
// without torchrun. Each rank is this zoo binary with the rest of the command
// line and the launcher environment torchrun sets (RANK, LOCAL_RANK,
// WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT). When a rank fails
// the launcher stops the others and exits with its code, naming it.
// Defines: LaunchCommand, launch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zoo {

struct LaunchCommand {
  int64_t nproc_per_node = 1;
  int64_t nnodes = 1;
  int64_t node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;
  std::vector<std::string> args;  // the zoo command each rank runs
};

// Runs the ranks and waits for them; returns the exit code for the launcher.
int launch(const LaunchCommand& command);

}  // namespace zoo
