// The engine's version and the git commit it was built from, for --version and the results file.
// The definitions are generated at every build by cmake/GlacierBuildInfo.cmake.
#pragma once

namespace glacier {

// The CMake project version, e.g. "0.1.0".
const char* build_version();
// `git describe --always --dirty` of the source tree when it was built ("-dirty": with uncommitted
// changes), or "unknown" when it was not built from a git checkout.
const char* build_commit();

}  // namespace glacier
