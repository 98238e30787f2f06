# The ledger's crash test and multi-process test (included by
# tests/integration/CMakeLists.txt).  Plain C programs: no server, no
# network; each works in its own directory under the build tree.
sg_parts_check(ledger_ok ledger_tests ${CMAKE_CURRENT_SOURCE_DIR}/ledger_crash_test.c
               ${CMAKE_CURRENT_SOURCE_DIR}/ledger_multiproc_test.c)
if(ledger_ok)
  foreach(t ledger_crash_test ledger_multiproc_test)
    add_executable(${t} ${CMAKE_CURRENT_SOURCE_DIR}/${t}.c)
    target_link_libraries(${t} PRIVATE streamguard_static)
    target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/src)
    target_compile_options(${t} PRIVATE ${SG_WARNINGS})
  endforeach()

  # 300 SIGKILLs at random moments; the seed is printed (set
  # SG_LEDGER_CRASH_SEED to replay one).
  add_test(NAME integration.ledger.crash
           COMMAND ledger_crash_test ${CMAKE_CURRENT_BINARY_DIR} 300)
  set_tests_properties(integration.ledger.crash PROPERTIES
                       LABELS integration TIMEOUT 300)

  add_test(NAME integration.ledger.multiprocess
           COMMAND ledger_multiproc_test ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(integration.ledger.multiprocess PROPERTIES
                       LABELS integration TIMEOUT 300)
endif()
