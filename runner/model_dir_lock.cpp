// Implementation of runner/model_dir_lock.h.
#include "runner/model_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <string>

namespace zoo {

namespace {

std::string read_all(int fd) {
  std::string text;
  char buf[512];
  ssize_t n = 0;
  off_t at = 0;
  while ((n = ::pread(fd, buf, sizeof buf, at)) > 0 && text.size() < 4096) {
    text.append(buf, static_cast<size_t>(n));
    at += n;
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text;
}

}  // namespace

void lock_model_dir(const std::string& dir, const std::string& mode) {
  const std::string path = dir + "/zoo_run.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(path + ": cannot open the model_dir's lock file (" + std::strerror(errno) + ")");
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = read_all(fd);
    ::close(fd);
    if (error == EWOULDBLOCK)
      throw std::runtime_error("model_dir " + dir + " is in use by another zoo run (" +
                               (holder.empty() ? std::string("its pid not yet written") : holder) +
                               "); two runs in one model_dir would resume from each other's checkpoints. Wait for "
                               "it to end, stop it, or give this run another model_dir");
    throw std::runtime_error(path + ": cannot lock the model_dir (" + std::strerror(error) + ")");
  }
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  char started[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(started, sizeof started, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
  const std::string who =
      "pid " + std::to_string(::getpid()) + " on " + host + ", mode " + mode + ", started " + started + "\n";
  // The note only serves a second run's message: the lock holds without it.
  if (::ftruncate(fd, 0) == 0) (void)!::pwrite(fd, who.data(), who.size(), 0);
  // fd stays open, and locked, until the process ends.
}

}  // namespace zoo
