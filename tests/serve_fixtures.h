// zoo serve for the tests: the zoo binary serving in a child process.
// Defines: ServeProcess.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "test_util.h"

namespace zoo::testing {

// `zoo serve` in a child process on a free port of 127.0.0.1; SIGTERM at the end, which it must exit 0 on.
class ServeProcess {
 public:
  explicit ServeProcess(const std::string& args) {
    log_ = log_dir_ / "serve.log";
    pid_ = fork();
    if (pid_ == 0) {
      const std::string command = "exec " + testing::zoo_binary() + " serve --port 0 " + args + " > " + log_ + " 2>&1";
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int waited = 0; waited < 600 && port_ == 0; ++waited) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const std::string out = log();
      const size_t at = out.find("listening on http://127.0.0.1:");
      if (at != std::string::npos && out.find('\n', at) != std::string::npos)
        port_ = std::stoi(out.substr(at + std::string("listening on http://127.0.0.1:").size()));
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) break;
    }
  }
  ~ServeProcess() { stop(); }
  int stop() {
    if (pid_ <= 0) return exit_code_;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return exit_code_;
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string log() const { return std::filesystem::exists(log_) ? testing::read_file(log_) : ""; }

 private:
  TempDir log_dir_;
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_code_ = -1;
};

}  // namespace zoo::testing
