// Keeps a job's outputs from harming anything else: an output path may name no input (nor the other
// output), and one job at a time holds a results file, through an exclusive lock on a sidecar file.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "app/options.h"

namespace glacier::app {

// Throws InputError when --out or --jsonl names an input of the job (--model, --prompts, --config,
// --partition-from) or the other output: the same file (same device and inode, so hard links and
// symlinks count), or the same path before the output exists.
void check_outputs_apart_from_inputs(const JobOptions& o);

// True when the two paths name one file: the same inode when both exist, else the same normalized
// absolute path (symlinks in the existing part resolved).
bool same_file(const std::string& a, const std::string& b);

// An exclusive advisory lock on `<output>.lock` (flock), held for the object's lifetime; the sidecar
// records the holder's host and PID for the message a second job gets. The lock dies with the
// process, so a crashed job leaves no stale lock behind (a leftover sidecar file is harmless).
class OutputLock {
 public:
  // Throws InputError naming the output, the sidecar and the holder when another process holds it.
  explicit OutputLock(const std::string& output_path);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  const std::string& sidecar() const { return sidecar_; }

  static std::string sidecar_for(const std::string& output_path) { return output_path + ".lock"; }

 private:
  std::string sidecar_;
  int fd_ = -1;
};

// Locks every output of the job (--out, --jsonl), in that order; throws InputError like OutputLock.
std::vector<std::unique_ptr<OutputLock>> lock_outputs(const JobOptions& o);

}  // namespace glacier::app
