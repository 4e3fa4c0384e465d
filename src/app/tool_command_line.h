// The command line of the small tools (glacier_mkmodel, glacier_shard): parsed against their options, with
// --help printing them and a malformed line refused the same way in each.
#pragma once
#include <boost/program_options.hpp>
#include <optional>

namespace glacier::app {

// The options given, or nullopt after printing `opts` for --help (which `opts` must declare). Throws
// InputError("command line: ... (see --help)") for an unknown option or a value of the wrong kind.
std::optional<boost::program_options::variables_map> parse_tool_command_line(
    int argc, const char* const* argv, const boost::program_options::options_description& opts);

}  // namespace glacier::app
