// glacier_trace: reads the /trace table of a results file, prints per-rank compute/wait/recv/send
// and bubble fractions, and optionally writes Chrome/Perfetto trace-event JSON (--json OUT.json).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <string>

#include "io/chrome_trace.h"
#include "io/hdf5_results.h"
#include "io/hdf5_trace.h"
#include "io/trace_summary.h"
#include "util/error.h"

namespace {

constexpr const char* kUsage =
    "usage: glacier_trace RESULTS.h5 [--json OUT.json]\n"
    "  Prints, per rank, the fraction of the job span spent in compute, wait, recv and send, and the\n"
    "  bubble (no phase recorded). --json writes Chrome trace events for chrome://tracing or Perfetto:\n"
    "  one process per rank named 'replica r / stage s @ host', arrows for each micro-batch's hops.\n";

// A command-line mistake: reported with the usage text, unlike problems with the file itself.
struct UsageError : glacier::InputError {
  using glacier::InputError::InputError;
};

struct Arguments {
  std::string results_path;
  std::string json_path;
};

Arguments parse_arguments(int argc, char** argv) {
  Arguments args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--json") {
      if (i + 1 >= argc) throw UsageError("--json: expected an output file name, found nothing");
      args.json_path = argv[++i];
    } else if (arg.rfind("--json=", 0) == 0) {
      args.json_path = arg.substr(7);
    } else if (!arg.empty() && arg[0] == '-') {
      throw UsageError("unknown option " + arg + " (expected --json OUT.json)");
    } else if (args.results_path.empty()) {
      args.results_path = arg;
    } else {
      throw UsageError("expected one results file, found a second: " + arg);
    }
  }
  if (args.results_path.empty()) throw UsageError("expected a results file (RESULTS.h5), found none");
  return args;
}

void write_json(const std::string& path, const nlohmann::json& trace) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw glacier::InputError("cannot open " + path + " for writing: " + std::strerror(errno));
  out << trace.dump() << '\n';
  out.close();
  if (!out) throw std::runtime_error("cannot write " + path + ": " + std::strerror(errno));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Arguments args = parse_arguments(argc, argv);
    auto rows = glacier::io::read_trace(args.results_path);
    auto summary = glacier::io::summarize_trace(rows);
    std::fputs(glacier::io::format_trace_summary(summary).c_str(), stdout);
    if (!args.json_path.empty()) {
      const auto layout = glacier::io::trace_layout(glacier::io::read_root_attributes(args.results_path), rows,
                                                    args.results_path);
      write_json(args.json_path, glacier::io::chrome_trace_events(rows, layout));
      std::printf("wrote %zu trace events to %s\n", rows.size(), args.json_path.c_str());
    }
    return 0;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "glacier_trace: error: %s\n%s", e.what(), kUsage);
    return 2;
  } catch (const glacier::InputError& e) {
    std::fprintf(stderr, "glacier_trace: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "glacier_trace: error: %s\n", e.what());
    return 1;
  }
}
