# The easy handle against the real sg-fakemodel (included by
# tests/integration/CMakeLists.txt); built with the libcurl transport only.
if(TARGET sg-fakemodel AND TARGET sg_easy)
  add_executable(easy_test ${CMAKE_CURRENT_SOURCE_DIR}/easy_test.c)
  target_link_libraries(easy_test PRIVATE streamguard_static PkgConfig::CMOCKA Threads::Threads)
  target_compile_options(easy_test PRIVATE -Wall -Wextra)
  add_test(NAME integration.easy COMMAND easy_test $<TARGET_FILE:sg-fakemodel>)
  set_tests_properties(integration.easy PROPERTIES LABELS integration TIMEOUT 120)
endif()
