# A provider profile per endpoint (profile_endpoint_test.c): two
# sg-fakemodel instances playing different providers behind one operation
# on the libcurl transport (included from tests/integration/CMakeLists.txt).
if(NOT TARGET sg-fakemodel)
  return()
endif()
sg_parts_check(profile_endpoint_ok profile_endpoint_test
               ${CMAKE_CURRENT_LIST_DIR}/profile_endpoint_test.c
               DIRS ${CMAKE_CURRENT_LIST_DIR})
if(profile_endpoint_ok)
  if(NOT TARGET PkgConfig::CMOCKA)
    pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
  endif()
  add_executable(profile_endpoint_test ${CMAKE_CURRENT_LIST_DIR}/profile_endpoint_test.c)
  target_link_libraries(profile_endpoint_test PRIVATE streamguard_static PkgConfig::CMOCKA)
  sg_parts_link(profile_endpoint_test ${profile_endpoint_ok_PARTS})
  target_include_directories(profile_endpoint_test PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  target_compile_options(profile_endpoint_test PRIVATE -Wall -Wextra -Wno-unused-function)
  add_test(NAME integration.profile_endpoint
           COMMAND profile_endpoint_test $<TARGET_FILE:sg-fakemodel>)
  set_tests_properties(integration.profile_endpoint PROPERTIES LABELS integration
                       TIMEOUT 120)
endif()
