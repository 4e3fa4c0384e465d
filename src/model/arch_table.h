// The architecture table: what each supported `general.architecture` needs, in one place, so that
// adding an architecture is a table row rather than `if`s scattered over the compute code.
#pragma once
#include <string>
#include <vector>

#include "model/model_config.h"

namespace glacier::model {

struct ArchSpec {
  const char* name;
  RopeMode rope_mode;
  bool tied_output_allowed;  // output.weight may be absent (then the token embedding is reused)
};

const std::vector<ArchSpec>& supported_archs();
// The spec for `arch`; throws InputError naming the file, the arch and the supported list.
const ArchSpec& find_arch(const std::string& path, const std::string& arch);

}  // namespace glacier::model
