// Runs build/glacier_mpi under mpiexec from a test, and reads its JSONL output back.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace glacier::testing {

struct JobRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
  double seconds = 0.0;
};

// A job's time limit unless a test sets its own: seconds of work at most, so the limit only stops a hung job.
inline constexpr int kDefaultJobTimeLimitS = 120;

// `mpiexec -np NP <flags> build/glacier_mpi ARGS`, with a time limit (seconds) after which the job is
// killed (then exit_code is 124, as timeout(1) reports).
JobRun run_glacier(int np, const std::string& args, int time_limit_s = kDefaultJobTimeLimitS);
std::vector<nlohmann::json> read_jsonl(const std::string& path);

// A job's generated tokens and log-probs by prompt id, the log-probs as float bits (compared bit for bit).
struct GeneratedById {
  std::map<std::string, std::vector<int>> tokens;
  std::map<std::string, std::vector<uint32_t>> logprob_bits;
};
// Reads a JSONL results file; every row must have status ok (a test failure names the row otherwise).
GeneratedById read_generated(const std::string& jsonl);

// A job that chose its --decode-groups: its outputs, the results file's decode_groups attribute (parsed),
// its log.
struct DecodeGroupsJob {
  GeneratedById outputs;
  nlohmann::json decode_groups;
  std::string log;
};
// What `job` wrote: the JSONL results (`rows` of them, every row ok) and the decode_groups attribute of
// the results file h5. A job that failed is a test failure and leaves outputs and attribute empty.
DecodeGroupsJob read_decode_groups_job(const JobRun& job, const std::string& jsonl, const std::string& h5, size_t rows);

// A job over prompt lines written to p.jsonl in a fresh scratch directory named after `scratch_name`,
// with its outputs r.jsonl and r.h5 there; a non-zero exit is a test failure naming the log.
struct LinesJob {
  std::string jsonl;  // the JSONL output's bytes
  std::string log;
  std::string dir;
};
LinesJob run_lines_job(const std::string& model, const std::string& scratch_name, int np,
                       const std::vector<nlohmann::json>& lines, const std::string& extra,
                       int time_limit_s = kDefaultJobTimeLimitS);

// The job log's "N taken from the prefix cache" figure (prefill's summary line), or -1 when it has none.
int64_t prefix_cache_tokens(const std::string& log);

// A test failure, naming the first line that differs, unless the two JSONL outputs are the same bytes.
void expect_same_jsonl(const std::string& first, const std::string& second, const std::string& first_label,
                       const std::string& second_label);

}  // namespace glacier::testing
