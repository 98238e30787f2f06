# The ledger on PostgreSQL (included by tests/integration/CMakeLists.txt):
# each test starts a scratch server of its own (pg_lib.sh: initdb into a
# temporary directory as an unprivileged user, a Unix socket only) and
# stops it at the end.  Without PostgreSQL's server binaries they are
# skipped (exit 77).
sg_parts_check(pg_ok ledger_pg_test ${CMAKE_CURRENT_SOURCE_DIR}/ledger_pg_test.c
               NEEDS postgresql)
if(pg_ok)
  add_executable(ledger_pg_test ${CMAKE_CURRENT_SOURCE_DIR}/ledger_pg_test.c)
  target_link_libraries(ledger_pg_test PRIVATE streamguard_static PkgConfig::PQ)
  target_include_directories(ledger_pg_test PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(ledger_pg_test PRIVATE ${SG_WARNINGS})

  # The C API: schema, lifecycle, ownership, bounds, a lost connection.
  add_test(NAME integration.ledger.pg.api
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/ledger_pg.sh api
                   $<TARGET_FILE:ledger_pg_test>)
  set_tests_properties(integration.ledger.pg.api PROPERTIES
                       LABELS integration TIMEOUT 120 SKIP_RETURN_CODE 77)

  # Inside the transports' event loops: an intent waiting for the database
  # holds up no other stream (libcurl multi and HTTP/2).
  sg_parts_check(pg_loop_ok ledger_pg_loop_test
                 ${CMAKE_CURRENT_SOURCE_DIR}/ledger_pg_loop_test.c)
  if(TARGET sg-fakemodel AND pg_loop_ok)
    add_executable(ledger_pg_loop_test ${CMAKE_CURRENT_SOURCE_DIR}/ledger_pg_loop_test.c)
    target_link_libraries(ledger_pg_loop_test PRIVATE streamguard_static PkgConfig::PQ)
    target_compile_options(ledger_pg_loop_test PRIVATE -Wall -Wextra -Wno-unused-function)
    add_test(NAME integration.ledger.pg.loop
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/ledger_pg.sh api
                     $<TARGET_FILE:ledger_pg_loop_test> $<TARGET_FILE:sg-fakemodel>)
    set_tests_properties(integration.ledger.pg.loop PROPERTIES
                         LABELS integration TIMEOUT 120 SKIP_RETURN_CODE 77)
  endif()

  # sg-stream --ledger postgresql://... against sg-fakemodel: concurrent
  # workers on one key, the database stopped mid-run, workers killed.
  if(TARGET sg-stream AND TARGET sg-fakemodel)
    add_test(NAME integration.ledger.pg.cli
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/ledger_pg.sh cli
                     $<TARGET_FILE:sg-stream> $<TARGET_FILE:sg-fakemodel>)
    set_tests_properties(integration.ledger.pg.cli PROPERTIES
                         LABELS integration TIMEOUT 180 SKIP_RETURN_CODE 77)
  endif()
endif()
