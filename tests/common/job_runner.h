// Runs build/glacier_mpi under mpiexec from a test, and reads its JSONL output back.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace glacier::testing {

struct JobRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
  double seconds = 0.0;
};

// `mpiexec -np NP <flags> build/glacier_mpi ARGS`, with a time limit (seconds) after which the job is
// killed (then exit_code is 124, as timeout(1) reports).
JobRun run_glacier(int np, const std::string& args, int time_limit_s = 120);
std::vector<nlohmann::json> read_jsonl(const std::string& path);

}  // namespace glacier::testing
