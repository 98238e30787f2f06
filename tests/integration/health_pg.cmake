# Endpoint health shared by processes through PostgreSQL (included from
# tests/integration/CMakeLists.txt): two processes, each its own sg_health
# and share, on a scratch server of the test's own (health_pg.sh over
# pg_lib.sh), stopped, restarted, frozen and thawed mid-run.  Without
# PostgreSQL's server binaries it is skipped (exit 77).
sg_parts_check(health_pg_ok health_pg_test ${CMAKE_CURRENT_LIST_DIR}/health_pg_test.c)
if(NOT health_pg_ok)
  return()
endif()
add_executable(health_pg_test ${CMAKE_CURRENT_LIST_DIR}/health_pg_test.c)
target_link_libraries(health_pg_test PRIVATE streamguard_static PkgConfig::PQ)
target_compile_options(health_pg_test PRIVATE ${SG_WARNINGS} -Wno-unused-function)
add_test(NAME integration.health.pg
         COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/health_pg.sh api
                 $<TARGET_FILE:health_pg_test>)
set_tests_properties(integration.health.pg PROPERTIES
                     LABELS integration TIMEOUT 180 SKIP_RETURN_CODE 77)
