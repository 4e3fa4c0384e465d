# glacier_build_info(NAME): a library defining glacier::build_version() and build_commit()
# (src/version/build_info.h) from a source regenerated at every build, so the commit is never stale;
# the source is rewritten only when its text changes, so an unchanged tree recompiles nothing.
# Run with cmake -P (as the build does), this file is that generator.
if(CMAKE_SCRIPT_MODE_FILE)
  set(commit "unknown")
  if(EXISTS "${SOURCE_DIR}/.git" AND GIT_EXECUTABLE)  # .git is a file in a worktree, a folder otherwise
    execute_process(COMMAND "${GIT_EXECUTABLE}" describe --always --dirty
                    WORKING_DIRECTORY "${SOURCE_DIR}" OUTPUT_VARIABLE described RESULT_VARIABLE status
                    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(status EQUAL 0 AND described)
      set(commit "${described}")
    endif()
  endif()
  set(text "// Generated at build time by cmake/GlacierBuildInfo.cmake: do not edit.
#include \"version/build_info.h\"

namespace glacier {

const char* build_version() { return \"${VERSION}\"; }
const char* build_commit() { return \"${commit}\"; }

}  // namespace glacier
")
  set(previous "")
  if(EXISTS "${OUTPUT}")
    file(READ "${OUTPUT}" previous)
  endif()
  if(NOT previous STREQUAL text)
    file(WRITE "${OUTPUT}" "${text}")
  endif()
  return()
endif()

find_package(Git QUIET)

function(glacier_build_info name)
  set(output "${PROJECT_BINARY_DIR}/generated/build_info.cpp")
  set(generate ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DVERSION=${PROJECT_VERSION}
               -DGIT_EXECUTABLE=${GIT_EXECUTABLE} -DOUTPUT=${output} -P ${CMAKE_CURRENT_FUNCTION_LIST_FILE})
  execute_process(COMMAND ${generate})  # the source exists from configure on
  add_custom_target(${name}_generate COMMAND ${generate} BYPRODUCTS ${output} VERBATIM)
  add_library(${name} STATIC ${output})
  add_dependencies(${name} ${name}_generate)
  target_include_directories(${name} PUBLIC "${PROJECT_SOURCE_DIR}/src")
endfunction()
