// parse_tool_command_line: Boost.Program_options' parse, its errors as InputError, and --help.
#include "app/tool_command_line.h"

#include <iostream>
#include <string>

#include "util/error.h"

namespace glacier::app {

namespace po = boost::program_options;

std::optional<po::variables_map> parse_tool_command_line(int argc, const char* const* argv,
                                                         const po::options_description& opts) {
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, opts), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw InputError(std::string("command line: ") + e.what() + " (see --help)");
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return std::nullopt;
  }
  return vm;
}

}  // namespace glacier::app
