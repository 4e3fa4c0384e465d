// The module graph as built, checked against the code: every `#include "m/..."` of a file in src/<module>
// (or kernels/) names its own module or one the module depends on in src/CMakeLists.txt (directly or
// through others), the declared graph has no cycle, and the three system libraries stay behind their
// modules: mpi.h only in src/comm, hwloc.h only in src/sys, hdf5.h only in the .cpp files of src/io.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kRoot = GLACIER_SOURCE_DIR;

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// module directory -> the module directories it depends on directly, from src/CMakeLists.txt's
// glacier_module(glacier_<name> <dir> deps...) calls; kernels (its own CMakeLists) depend on util.
std::map<std::string, std::set<std::string>> declared_graph() {
  std::map<std::string, std::set<std::string>> graph = {{"kernels", {"util"}}, {"version", {}}};
  std::string text = read_text(kRoot / "src/CMakeLists.txt");
  // [^)]* spans the lines of a call that continues on the next one.
  const std::regex call(R"(glacier_module\((glacier_\w+)\s+(\w+)([^)]*)\))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), call); it != std::sregex_iterator(); ++it) {
    std::set<std::string>& deps = graph[(*it)[2]];
    std::istringstream args((*it)[3]);
    for (std::string a; args >> a;)
      if (a.rfind("glacier_", 0) == 0) deps.insert(a.substr(8));
  }
  return graph;
}

std::set<std::string> reachable(const std::map<std::string, std::set<std::string>>& g, const std::string& from) {
  std::set<std::string> seen;
  std::function<void(const std::string&)> visit = [&](const std::string& m) {
    auto it = g.find(m);
    if (it == g.end()) return;
    for (const std::string& d : it->second)
      if (seen.insert(d).second) visit(d);
  };
  visit(from);
  return seen;
}

struct SourceFile {
  fs::path path;
  std::string module;  // src/<module>/..., or "kernels"
  std::vector<std::string> includes;  // the text between the quotes or angle brackets
  std::vector<bool> quoted;           // "..." (the project's headers) rather than <...>
};

std::vector<SourceFile> sources() {
  std::vector<SourceFile> files;
  const std::regex include(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  auto add_tree = [&](const fs::path& dir, const std::function<std::string(const fs::path&)>& module_of) {
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      const std::string ext = e.path().extension().string();
      if (ext != ".h" && ext != ".cpp") continue;
      SourceFile f{e.path(), module_of(e.path()), {}, {}};
      std::istringstream lines(read_text(e.path()));
      std::smatch m;
      for (std::string line; std::getline(lines, line);)
        if (std::regex_search(line, m, include)) {
          f.includes.push_back(m[2]);
          f.quoted.push_back(m[1] == "\"");
        }
      files.push_back(std::move(f));
    }
  };
  add_tree(kRoot / "src", [](const fs::path& p) { return fs::relative(p, kRoot / "src").begin()->string(); });
  add_tree(kRoot / "kernels", [](const fs::path&) { return std::string("kernels"); });
  return files;
}

std::string module_of_include(const std::string& include) {
  const size_t slash = include.find('/');
  return slash == std::string::npos ? "" : include.substr(0, slash);
}

TEST(ModuleEdges, EveryIncludeFollowsTheDeclaredGraph) {
  const auto graph = declared_graph();
  ASSERT_GE(graph.size(), 10u) << "src/CMakeLists.txt's glacier_module calls were not found";
  const std::set<std::string> modules = [&] {
    std::set<std::string> s;
    for (const auto& [m, deps] : graph) s.insert(m);
    return s;
  }();
  size_t checked = 0;
  for (const SourceFile& f : sources()) {
    if (!graph.count(f.module)) continue;  // src/python and other non-C++ trees
    const std::set<std::string> allowed = reachable(graph, f.module);
    for (size_t i = 0; i < f.includes.size(); ++i) {
      const std::string& inc = f.includes[i];
      const std::string target = module_of_include(inc);
      if (!f.quoted[i] || !modules.count(target) || target == f.module) continue;
      ++checked;
      EXPECT_TRUE(allowed.count(target)) << f.path.string() << " includes \"" << inc << "\", but module " << f.module
                                         << " does not depend on " << target << " in src/CMakeLists.txt";
    }
  }
  EXPECT_GT(checked, 100u) << "too few cross-module includes were found: is the source tree there?";
}

TEST(ModuleEdges, TheDeclaredGraphHasNoCycle) {
  const auto graph = declared_graph();
  for (const auto& [m, deps] : graph) EXPECT_FALSE(reachable(graph, m).count(m)) << "module " << m << " depends on itself";
}

TEST(ModuleEdges, SystemLibrariesStayBehindTheirModules) {
  for (const SourceFile& f : sources()) {
    for (const std::string& inc : f.includes) {
      if (inc == "mpi.h") {
        EXPECT_EQ(f.module, "comm") << f.path.string() << " includes mpi.h";
      } else if (inc == "hwloc.h") {
        EXPECT_EQ(f.module, "sys") << f.path.string() << " includes hwloc.h";
      } else if (inc == "hdf5.h") {
        // Only in io's .cpp files: an io header with it would hand HDF5's whole API to whoever includes it.
        EXPECT_TRUE(f.module == "io" && f.path.extension() == ".cpp") << f.path.string() << " includes hdf5.h";
      }
    }
  }
}

}  // namespace

// The public headers (include/glacier/) are the library's whole interface: they include only the
// standard library and each other, so a user needs neither src/ on the include path nor MPI, HDF5 or
// hwloc headers; and no module but api includes them (the engine does not depend on its own facade).
TEST(ModuleEdges, PublicHeadersStandAlone) {
  size_t headers = 0;
  const std::regex include(R"(^\s*#\s*include\s*([<"])([^>"]+)[>"])");
  for (const auto& e : fs::recursive_directory_iterator(kRoot / "include")) {
    if (e.path().extension() != ".h") continue;
    ++headers;
    std::istringstream lines(read_text(e.path()));
    std::smatch m;
    for (std::string line; std::getline(lines, line);) {
      if (!std::regex_search(line, m, include)) continue;
      const std::string inc = m[2];
      const bool standard = m[1] == "<" && inc.find('.') == std::string::npos && inc.find('/') == std::string::npos;
      EXPECT_TRUE(standard || inc.rfind("glacier/", 0) == 0)
          << e.path().string() << " includes " << inc << ": a public header may include only the standard library "
          << "and other glacier/ headers";
    }
  }
  EXPECT_GE(headers, 1u) << "no public header under include/glacier";
  for (const SourceFile& f : sources()) {
    for (const std::string& inc : f.includes) {
      if (inc.rfind("glacier/", 0) == 0) {
        EXPECT_EQ(f.module, "api") << f.path.string() << " includes the public header " << inc;
      }
    }
  }
}
