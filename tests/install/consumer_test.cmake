# Installs the build tree into a scratch prefix, then builds and runs a tiny
# consumer against it twice: with pkg-config and with find_package().
set(prefix ${SG_WORK_DIR}/prefix)
file(REMOVE_RECURSE ${SG_WORK_DIR})
file(MAKE_DIRECTORY ${SG_WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rv OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rv EQUAL 0)
    message(FATAL_ERROR "failed (${rv}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${SG_BUILD_DIR} --prefix ${prefix})

# 1. pkg-config
find_program(PKG_CONFIG pkg-config REQUIRED)
set(ENV{PKG_CONFIG_PATH} "${prefix}/lib/pkgconfig:${prefix}/lib64/pkgconfig")
foreach(d lib lib64 lib/x86_64-linux-gnu)
  if(EXISTS ${prefix}/${d}/pkgconfig/streamguard.pc)
    set(ENV{PKG_CONFIG_PATH} "${prefix}/${d}/pkgconfig")
  endif()
endforeach()
# The .pc file carries the configure-time prefix; point pkg-config at ours.
execute_process(COMMAND ${PKG_CONFIG} --define-variable=prefix=${prefix}
                        --cflags --libs streamguard
                RESULT_VARIABLE rv OUTPUT_VARIABLE flags
                OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT rv EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs streamguard failed")
endif()
separate_arguments(flags UNIX_COMMAND "${flags}")
run(${SG_C_COMPILER} -std=c11 -Wall -Werror
    ${SG_SOURCE_DIR}/tests/install/consumer/consumer.c ${flags}
    -o ${SG_WORK_DIR}/consumer_pc)
file(GLOB libdirs LIST_DIRECTORIES true ${prefix}/lib*)
string(REPLACE ";" ":" ldpath "${libdirs}")
run(${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${ldpath} ${SG_WORK_DIR}/consumer_pc)
message(STATUS "pkg-config consumer: ${last_output}")

# 2. find_package
run(${CMAKE_COMMAND} -S ${SG_SOURCE_DIR}/tests/install/consumer
    -B ${SG_WORK_DIR}/cmake-build -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_C_COMPILER=${SG_C_COMPILER})
run(${CMAKE_COMMAND} --build ${SG_WORK_DIR}/cmake-build)
run(${SG_WORK_DIR}/cmake-build/consumer_shared)
message(STATUS "find_package consumer (shared): ${last_output}")
run(${SG_WORK_DIR}/cmake-build/consumer_static)
message(STATUS "find_package consumer (static): ${last_output}")
