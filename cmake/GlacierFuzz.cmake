# GLACIER_FUZZ: libFuzzer targets, one per tests/fuzz/<name>_fuzz.cpp, built as build/<name>_fuzz.
# Needs clang and GLACIER_SANITIZE (the targets run under ASan and UBSan); see .ci/sanitizers.
option(GLACIER_FUZZ "Build the libFuzzer targets in tests/fuzz (clang only, with GLACIER_SANITIZE)" OFF)
if(NOT GLACIER_FUZZ)
  return()
endif()
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "GLACIER_FUZZ needs clang (libFuzzer), found ${CMAKE_CXX_COMPILER_ID}: "
                      "configure with CC=clang CXX=clang++")
endif()
if(NOT GLACIER_SANITIZE)
  message(FATAL_ERROR "GLACIER_FUZZ needs -DGLACIER_SANITIZE=ON too: the fuzz targets and the "
                      "libraries they test must be built with the same AddressSanitizer flags")
endif()

# Coverage instrumentation for every library, so the fuzzer is guided by the branches of the code it
# tests and not only by the target's own file; the libFuzzer driver itself is linked into targets only.
add_compile_options(-fsanitize=fuzzer-no-link)

file(GLOB glacier_fuzz_sources CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/tests/fuzz/*_fuzz.cpp")
foreach(src IN LISTS glacier_fuzz_sources)
  get_filename_component(fuzz_target ${src} NAME_WE)
  add_executable(${fuzz_target} ${src})
  # glacier_io brings the modules under test with it: io -> model -> gguf -> util.
  target_link_libraries(${fuzz_target} PRIVATE glacier_io)
  target_compile_options(${fuzz_target} PRIVATE -fsanitize=fuzzer)
  target_link_options(${fuzz_target} PRIVATE -fsanitize=fuzzer)
  set_target_properties(${fuzz_target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${PROJECT_BINARY_DIR}")
endforeach()
