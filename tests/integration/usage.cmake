# Usage and cost end to end, on the libcurl and HTTP/2 transports against
# the real sg-fakemodel (included by tests/integration/CMakeLists.txt).
sg_parts_check(usage_ok usage_test ${CMAKE_CURRENT_LIST_DIR}/usage_test.c
               DIRS ${CMAKE_CURRENT_LIST_DIR})
if(TARGET sg-fakemodel AND usage_ok)
  add_executable(usage_test ${CMAKE_CURRENT_LIST_DIR}/usage_test.c)
  target_link_libraries(usage_test PRIVATE streamguard_static PkgConfig::CMOCKA)
  sg_parts_link(usage_test ${usage_ok_PARTS})
  target_include_directories(usage_test PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  target_compile_options(usage_test PRIVATE -Wall -Wextra -Wno-unused-function)
  add_test(NAME integration.usage COMMAND usage_test $<TARGET_FILE:sg-fakemodel>)
  set_tests_properties(integration.usage PROPERTIES LABELS integration TIMEOUT 300)
endif()
