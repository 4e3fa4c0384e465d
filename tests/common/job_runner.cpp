// JobRun: popen of a timeout-wrapped mpiexec command line (the flags this machine needs come from CMake).
#include "common/job_runner.h"

#include <gtest/gtest.h>

#include <cstring>

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <sys/wait.h>

#include "common/test_env.h"
#include "io/hdf5_results.h"
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

DecodeGroupsJob read_decode_groups_job(const JobRun& job, const std::string& jsonl, const std::string& h5, size_t rows) {
  DecodeGroupsJob r;
  r.log = job.output;
  EXPECT_EQ(job.exit_code, 0) << job.output;
  if (job.exit_code != 0) return r;
  r.outputs = read_generated(jsonl);
  EXPECT_EQ(r.outputs.tokens.size(), rows);
  const auto attrs = io::read_root_attributes(h5);
  r.decode_groups = nlohmann::json::parse(std::get<std::string>(attrs.at("decode_groups")));
  return r;
}

LinesJob run_lines_job(const std::string& model, const std::string& scratch_name, int np,
                       const std::vector<nlohmann::json>& lines, const std::string& extra, int time_limit_s) {
  const std::string dir = scratch_dir(scratch_name);
  {
    std::ofstream out(dir + "/p.jsonl");
    for (const nlohmann::json& l : lines) out << l.dump() << "\n";
  }
  const JobRun r = run_glacier(np, "--model " + model + " --prompts " + dir + "/p.jsonl --jsonl " + dir +
                                       "/r.jsonl --out " + dir + "/r.h5 " + extra,
                               time_limit_s);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return {read_text(dir + "/r.jsonl"), r.output, dir};
}

int64_t prefix_cache_tokens(const std::string& log) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex("prompt tokens computed, (\\d+) taken from the prefix cache"))) return -1;
  return std::stoll(m[1]);
}

void expect_same_jsonl(const std::string& first, const std::string& second, const std::string& first_label,
                       const std::string& second_label) {
  ASSERT_FALSE(second.empty()) << second_label << " wrote no results";
  if (first == second) return;
  std::istringstream a(first), b(second);
  std::string la, lb;
  for (int line = 1; std::getline(a, la) && std::getline(b, lb); ++line)
    ASSERT_EQ(la, lb) << "line " << line << " differs with " << first_label << " (first) and " << second_label
                      << " (second)";
  FAIL() << "the results have different line counts with " << first_label << " and " << second_label;
}

}  // namespace glacier::testing
