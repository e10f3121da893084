// Logging for every zoo target: level control, console + per-run log file, and
// a printf-style format helper. Defines: zoo::log::{Level, set_level,
// parse_level, add_file_sink, progress, debug, info, warn, error}, zoo::strf.
//
// Only runner/log.cpp sees spdlog (torch 2.x ships an fmt that breaks Debian's
// spdlog), so this header must stay free of spdlog and fmt.
#pragma once
#include <string>

namespace zoo {

// printf-style formatting into a std::string.
std::string strf(const char* format, ...) __attribute__((format(printf, 1, 2)));

namespace log {

enum class Level { debug, info, warning, error };

// Accepts modelzoo's --logging names (DEBUG, INFO, WARNING/WARN, ERROR,
// CRITICAL; any case). Throws std::invalid_argument naming the accepted ones.
Level parse_level(const std::string& name);
void set_level(Level level);

// Also write every line to `path` (appending); replaces an earlier file sink.
void add_file_sink(const std::string& path);
void remove_file_sink();

// A transient status line (e.g. a progress bar) on an interactive terminal:
// redrawn in place, cleared before the next log line, never written to the
// log file. A no-op when stdout is not a terminal.
void progress(const std::string& line);
void end_progress();
bool progress_enabled();

void debug(const std::string& message);
void info(const std::string& message);
void warn(const std::string& message);
void error(const std::string& message);

}  // namespace log
}  // namespace zoo
