// Implementation of runner/launch.h with fork/exec and waitpid.
#include "runner/launch.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <thread>

namespace zoo {

namespace {

volatile sig_atomic_t g_stop_signal = 0;
void note_signal(int sig) { g_stop_signal = sig; }

std::string self_path() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string("zoo");
}

pid_t start_rank(const std::string& exe, const LaunchCommand& c, int64_t local_rank) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const int64_t world = c.nproc_per_node * c.nnodes;
  setenv("RANK", std::to_string(c.node_rank * c.nproc_per_node + local_rank).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(local_rank).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(c.nproc_per_node).c_str(), 1);
  setenv("MASTER_ADDR", c.master_addr.c_str(), 1);
  setenv("MASTER_PORT", std::to_string(c.master_port).c_str(), 1);
  std::vector<char*> argv{const_cast<char*>(exe.c_str())};
  for (const auto& a : c.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(exe.c_str(), argv.data());
  std::cerr << "zoo launch: cannot run " << exe << ": " << std::strerror(errno) << std::endl;
  _exit(127);
}

std::string describe(int status) {
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

int launch(const LaunchCommand& c) {
  // Ranks share the cores: unless told otherwise, each takes its part.
  if (!std::getenv("OMP_NUM_THREADS")) {
    const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
    setenv("OMP_NUM_THREADS", std::to_string(std::max<int64_t>(1, cores / c.nproc_per_node)).c_str(), 1);
  }
  const std::string exe = self_path();
  std::map<pid_t, int64_t> running;  // pid -> rank
  for (int64_t i = 0; i < c.nproc_per_node; ++i) running[start_rank(exe, c, i)] = c.node_rank * c.nproc_per_node + i;
  struct sigaction action {};
  action.sa_handler = note_signal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  int exit_code = 0;
  auto stop_others = [&](int sig) {
    for (const auto& [pid, rank] : running) kill(pid, sig);
  };
  auto deadline = std::chrono::steady_clock::time_point::max();
  while (!running.empty()) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && running.count(pid)) {
      const int64_t rank = running[pid];
      running.erase(pid);
      const bool failed = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
      if (failed && exit_code == 0) {
        exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        std::cerr << "zoo launch: rank " << rank << " " << describe(status) << "; stopping the other ranks"
                  << std::endl;
        stop_others(SIGTERM);
        deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      }
      continue;
    }
    if (g_stop_signal && exit_code == 0) {
      std::cerr << "zoo launch: signal " << g_stop_signal << "; stopping the ranks" << std::endl;
      exit_code = 128 + g_stop_signal;
      stop_others(SIGTERM);
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    }
    if (std::chrono::steady_clock::now() > deadline) {  // a rank that ignores SIGTERM
      stop_others(SIGKILL);
      deadline = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return exit_code;
}

}  // namespace zoo
