// spdlog-backed implementation of runner/log.h, in modelzoo's line format
// "%(asctime)s %(levelname)s:  %(message)s".
#include "runner/log.h"

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>

namespace zoo {

std::string strf(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out(n > 0 ? n : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), n + 1, format, args);
  va_end(args);
  return out;
}

namespace log {
namespace {

struct State {
  std::shared_ptr<spdlog::logger> logger;
  spdlog::sink_ptr file_sink;
  std::string file_path;
  std::string file_error;  // set by the logger's error handler when a sink fails
  Level level = Level::info;
  bool progress_shown = false;
};

State& state() {
  static State s = [] {
    State st;
    auto console = std::make_shared<spdlog::sinks::stdout_sink_mt>();
    st.logger = std::make_shared<spdlog::logger>("zoo", console);
    st.logger->set_pattern("%Y-%m-%d %H:%M:%S,%e %v");
    st.logger->set_level(spdlog::level::trace);
    st.logger->flush_on(spdlog::level::trace);
    // Called inside the logger's sink loop: only note it; emit() reports it.
    // spdlog names the file in its message; console failures (a closed
    // stdout) have nowhere better to go and are dropped.
    st.logger->set_error_handler([](const std::string& message) {
      State& s = state();
      const size_t at = s.file_path.empty() ? std::string::npos : message.find(s.file_path + ": ");
      if (s.file_error.empty() && at != std::string::npos) s.file_error = message.substr(at + s.file_path.size() + 2);
    });
    return st;
  }();
  return s;
}

void clear_progress(State& s) {
  if (!s.progress_shown) return;
  std::fputs("\r\033[K", stdout);
  std::fflush(stdout);
  s.progress_shown = false;
}

void emit(Level level, const char* name, const std::string& message) {
  State& s = state();
  if (level < s.level) return;
  clear_progress(s);
  s.logger->info("{}:  {}", name, message);
  if (!s.file_error.empty() && s.file_sink) {
    // A full disk, say: the console keeps the rest of the log.
    const std::string why = s.file_error, path = s.file_path;
    remove_file_sink();
    s.logger->info(
        "{}:  {}", "WARNING",
        "cannot write the run log " + path + " (" + why + "); from here on the log goes to the console only");
  }
}

}  // namespace

Level parse_level(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), ::toupper);
  if (n == "DEBUG" || n == "TRACE" || n == "VERBOSE") return Level::debug;
  if (n == "INFO") return Level::info;
  if (n == "WARNING" || n == "WARN") return Level::warning;
  if (n == "ERROR" || n == "CRITICAL" || n == "FATAL") return Level::error;
  throw std::invalid_argument("unknown logging level '" + name +
                              "' (expected DEBUG, INFO, WARNING, ERROR or CRITICAL)");
}

void set_level(Level level) { state().level = level; }

void add_file_sink(const std::string& path) {
  remove_file_sink();
  State& s = state();
  s.file_sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path, false);
  s.file_path = path;
  s.file_error.clear();
  s.file_sink->set_pattern("%Y-%m-%d %H:%M:%S,%e %v");
  s.logger->sinks().push_back(s.file_sink);
}

void remove_file_sink() {
  State& s = state();
  if (!s.file_sink) return;
  auto& sinks = s.logger->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), s.file_sink), sinks.end());
  s.file_sink.reset();
}

bool progress_enabled() {
  static const bool tty = isatty(fileno(stdout));
  return tty;
}

void progress(const std::string& line) {
  if (!progress_enabled()) return;
  State& s = state();
  std::fputs(("\r\033[K" + line).c_str(), stdout);
  std::fflush(stdout);
  s.progress_shown = true;
}

void end_progress() { clear_progress(state()); }

void debug(const std::string& m) { emit(Level::debug, "DEBUG", m); }
void info(const std::string& m) { emit(Level::info, "INFO", m); }
void warn(const std::string& m) { emit(Level::warning, "WARNING", m); }
void error(const std::string& m) { emit(Level::error, "ERROR", m); }

}  // namespace log
}  // namespace zoo
