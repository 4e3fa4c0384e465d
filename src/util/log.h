// Logging to stderr with a "rank N:" prefix, so interleaved lines of an MPI job stay attributable.
#pragma once
#include <cstdarg>

namespace glacier::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3 };

void set_rank(int rank);
void set_level(Level level);
Level level();
void write(Level level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace glacier::log

#define GLACIER_LOG_DEBUG(...) ::glacier::log::write(::glacier::log::Level::Debug, __VA_ARGS__)
#define GLACIER_LOG_INFO(...) ::glacier::log::write(::glacier::log::Level::Info, __VA_ARGS__)
#define GLACIER_LOG_WARN(...) ::glacier::log::write(::glacier::log::Level::Warn, __VA_ARGS__)
#define GLACIER_LOG_ERROR(...) ::glacier::log::write(::glacier::log::Level::Error, __VA_ARGS__)
