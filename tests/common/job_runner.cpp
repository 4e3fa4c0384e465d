// JobRun: popen of a timeout-wrapped mpiexec command line (the flags this machine needs come from CMake).
#include "common/job_runner.h"

#include <gtest/gtest.h>

#include <cstring>

#include <cstdio>
#include <fstream>
#include <sys/wait.h>

#include "util/clock.h"

namespace glacier::testing {

JobRun run_glacier(int np, const std::string& args, int time_limit_s) {
  const std::string cmd = "timeout -k 5 " + std::to_string(time_limit_s) + " " GLACIER_MPIEXEC " -np " +
                          std::to_string(np) + " " GLACIER_MPIEXEC_FLAGS " " GLACIER_BUILD_DIR "/glacier_mpi " + args +
                          " 2>&1";
  JobRun run;
  const double t0 = now_seconds();
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return run;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) run.output.append(buf, n);
  const int status = pclose(p);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  run.seconds = now_seconds() - t0;
  return run;
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

GeneratedById read_generated(const std::string& jsonl) {
  GeneratedById o;
  for (const auto& row : read_jsonl(jsonl)) {
    EXPECT_EQ(row["status"], "ok") << row.dump();
    const std::string id = row["id"];
    o.tokens[id] = row["tokens"].get<std::vector<int>>();
    for (double lp : row["logprobs"]) {
      const float f = static_cast<float>(lp);
      uint32_t bits;
      std::memcpy(&bits, &f, sizeof bits);
      o.logprob_bits[id].push_back(bits);
    }
  }
  return o;
}

}  // namespace glacier::testing
