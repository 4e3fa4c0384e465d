# Test helpers: every test gets GLACIER_SHARED_DIR in its environment; MPI tests run through
# mpiexec with the flags this kind of machine needs (root, oversubscription, yielding waits).
include(GoogleTest)
set(GLACIER_MPIEXEC_PREFLAGS --oversubscribe --bind-to none --allow-run-as-root
    CACHE STRING "Flags mpiexec gets in the MPI tests")
set(GLACIER_TEST_ENV
    "GLACIER_SHARED_DIR=${GLACIER_SHARED_DIR}"
    "OMPI_ALLOW_RUN_AS_ROOT=1" "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
    "OMPI_MCA_mpi_yield_when_idle=1" "OMPI_MCA_rmaps_base_oversubscribe=1"
    "OPENBLAS_NUM_THREADS=1")

# glacier_gtest(NAME LABEL SOURCES... LIBS ...): a GoogleTest binary whose cases become ctest tests.
function(glacier_gtest name label)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} glacier_testutil GTest::gtest GTest::gtest_main)
  # The environment list's semicolons must survive gtest_discover_tests' generated script.
  string(REPLACE ";" "\\;" env_list "${GLACIER_TEST_ENV}")
  gtest_discover_tests(${name}
    DISCOVERY_MODE PRE_TEST
    PROPERTIES LABELS "${label}" ENVIRONMENT "${env_list}"
               SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endfunction()

# add_mpi_test(NAME NP COMMAND...): runs COMMAND on NP ranks; a failure on any rank fails the test.
function(add_mpi_test name np)
  add_test(NAME ${name}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${GLACIER_MPIEXEC_PREFLAGS} ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS mpi ENVIRONMENT "${GLACIER_TEST_ENV}"
                       SKIP_RETURN_CODE 77 TIMEOUT 300)
endfunction()
