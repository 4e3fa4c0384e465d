// Rows of the architecture table. Only what the compute code implements is listed: a model of
// another architecture is refused with the list below instead of computing something wrong.
#include "model/arch_table.h"

#include "util/error.h"

namespace glacier::model {

const std::vector<ArchSpec>& supported_archs() {
  static const std::vector<ArchSpec> table = {
      {"llama", RopeMode::Normal, true},
  };
  return table;
}

const ArchSpec& find_arch(const std::string& path, const std::string& arch) {
  std::string names;
  for (const ArchSpec& s : supported_archs()) {
    if (arch == s.name) return s;
    names += (names.empty() ? "" : ", ") + std::string(s.name);
  }
  throw InputError(path + ": key 'general.architecture': expected one of the supported architectures (" + names +
                   "), found '" + arch + "'");
}

}  // namespace glacier::model
