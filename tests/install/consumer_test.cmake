# The installed tree is right wherever it is put, not only where the build
# was configured to go (SG_INSTALL_PREFIX): it installs the build twice, with
# `cmake --install --prefix OTHER` and with DESTDIR, and against each tree
# builds and runs a tiny consumer four ways - pkg-config (streamguard.pc and
# streamguard-static.pc) and find_package() (shared and static targets) -
# and checks the installed sg-stream and its man page.
cmake_minimum_required(VERSION 3.20)
file(REMOVE_RECURSE ${SG_WORK_DIR})
file(MAKE_DIRECTORY ${SG_WORK_DIR})
find_program(PKG_CONFIG pkg-config REQUIRED)
find_program(MAN man)
find_program(READELF readelf)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rv OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rv EQUAL 0)
    message(FATAL_ERROR "failed (${rv}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

# same_dir(WHAT GOT WANT): GOT, however it is spelled, is the directory WANT.
function(same_dir what got want)
  file(REAL_PATH "${got}" got_real)
  file(REAL_PATH "${want}" want_real)
  if(NOT got_real STREQUAL want_real)
    message(FATAL_ERROR "${what} is ${got}, not ${want}")
  endif()
endfunction()

# check_tree(NAME ROOT): consumers built against the tree installed at ROOT.
function(check_tree name root)
  set(work ${SG_WORK_DIR}/${name})
  set(libdir ${root}/${SG_LIBDIR})
  file(MAKE_DIRECTORY ${work})

  # 0. every public header is installed where the source has it, and the
  #    consumer includes each one by name (so each compiles alone, outside
  #    the source tree)
  file(GLOB_RECURSE headers RELATIVE ${SG_SOURCE_DIR}/include
       ${SG_SOURCE_DIR}/include/streamguard/*.h)
  file(READ ${SG_SOURCE_DIR}/tests/install/consumer/consumer.c consumer_src)
  foreach(h ${headers})
    # a part the build left out (README, "Build options") installs none
    get_filename_component(base ${h} NAME)
    if(base IN_LIST SG_HEADERS_NOT_BUILT AND NOT h MATCHES "/unstable/")
      if(EXISTS ${root}/${SG_INCLUDEDIR}/${h})
        message(FATAL_ERROR "${name}: ${h} is installed by a build without its part")
      endif()
      continue()
    endif()
    if(NOT EXISTS ${root}/${SG_INCLUDEDIR}/${h})
      message(FATAL_ERROR "${name}: ${h} is not installed")
    endif()
    string(REGEX MATCH "#[ ]*include <${h}>" at "${consumer_src}")
    if(NOT at)
      message(FATAL_ERROR "tests/install/consumer/consumer.c does not include <${h}>")
    endif()
  endforeach()

  # 1. pkg-config, found through PKG_CONFIG_PATH alone
  set(ENV{PKG_CONFIG_PATH} ${libdir}/pkgconfig)
  foreach(pc streamguard streamguard-static)
    foreach(var libdir includedir)
      execute_process(COMMAND ${PKG_CONFIG} --variable=${var} ${pc}
                      RESULT_VARIABLE rv OUTPUT_VARIABLE value
                      OUTPUT_STRIP_TRAILING_WHITESPACE)
      if(NOT rv EQUAL 0)
        message(FATAL_ERROR "${name}: pkg-config does not find ${pc} in ${libdir}/pkgconfig")
      endif()
      set(pc_${var} ${value})
    endforeach()
    same_dir("${name}: ${pc}.pc's libdir" ${pc_libdir} ${libdir})
    same_dir("${name}: ${pc}.pc's includedir" ${pc_includedir} ${root}/${SG_INCLUDEDIR})
  endforeach()

  run(${PKG_CONFIG} --cflags --libs streamguard)
  separate_arguments(flags UNIX_COMMAND "${last_output}")
  run(${SG_C_COMPILER} -std=c11 -Wall -Werror ${SG_SOURCE_DIR}/tests/install/consumer/consumer.c
      ${flags} -o ${work}/consumer_pc)
  run(${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir} ${work}/consumer_pc)
  message(STATUS "${name}: pkg-config consumer (streamguard): ${last_output}")

  run(${PKG_CONFIG} --cflags --libs streamguard-static)
  separate_arguments(flags UNIX_COMMAND "${last_output}")
  run(${SG_C_COMPILER} -std=c11 -Wall -Werror ${SG_SOURCE_DIR}/tests/install/consumer/consumer.c
      ${flags} -o ${work}/consumer_pc_static)
  run(${work}/consumer_pc_static)
  message(STATUS "${name}: pkg-config consumer (streamguard-static): ${last_output}")
  if(READELF)
    run(${READELF} -d ${work}/consumer_pc_static)
    if(last_output MATCHES "libstreamguard")
      message(FATAL_ERROR "${name}: the static consumer needs libstreamguard.so")
    endif()
  endif()

  # libstreamguard-otel through streamguard-otel.pc, when installed
  if(EXISTS ${libdir}/pkgconfig/streamguard-otel.pc)
    run(${PKG_CONFIG} --cflags --libs streamguard-otel)
    separate_arguments(flags UNIX_COMMAND "${last_output}")
    run(${SG_C_COMPILER} -std=c11 -Wall -Werror
        ${SG_SOURCE_DIR}/tests/install/consumer/otel_consumer.c ${flags} -o ${work}/consumer_otel)
    run(${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir} ${work}/consumer_otel)
    message(STATUS "${name}: pkg-config consumer (streamguard-otel): ${last_output}")
  endif()

  # A fully static link also takes libcurl's own dependencies, static; this
  # system need not have them all, but the .pc must name what the archive
  # itself needs (SG_STATIC_LIBS: those of the parts built).
  run(${PKG_CONFIG} --static --libs streamguard)
  separate_arguments(flags UNIX_COMMAND "${last_output}")
  separate_arguments(want UNIX_COMMAND "${SG_STATIC_LIBS}")
  foreach(lib IN LISTS want)
    if(NOT lib IN_LIST flags)
      message(FATAL_ERROR "${name}: pkg-config --static --libs streamguard lacks ${lib}")
    endif()
  endforeach()
  unset(ENV{PKG_CONFIG_PATH})

  # 2. find_package(), found through CMAKE_PREFIX_PATH
  run(${CMAKE_COMMAND} -S ${SG_SOURCE_DIR}/tests/install/consumer -B ${work}/cmake-build
      -DCMAKE_PREFIX_PATH=${root} -DCMAKE_C_COMPILER=${SG_C_COMPILER})
  file(STRINGS ${work}/cmake-build/CMakeCache.txt found REGEX "^streamguard_DIR:")
  string(REGEX REPLACE "^[^=]*=" "" found "${found}")
  same_dir("${name}: streamguard_DIR" ${found} ${libdir}/cmake/streamguard)
  run(${CMAKE_COMMAND} --build ${work}/cmake-build)
  run(${work}/cmake-build/consumer_shared)
  message(STATUS "${name}: find_package consumer (shared): ${last_output}")
  run(${work}/cmake-build/consumer_static)
  message(STATUS "${name}: find_package consumer (static): ${last_output}")
  if(EXISTS ${work}/cmake-build/consumer_otel)
    run(${work}/cmake-build/consumer_otel)
    message(STATUS "${name}: find_package consumer (otel): ${last_output}")
  endif()

  # 3. sg-stream and `man sg-stream`
  if(SG_WITH_SG_STREAM)
    run(${CMAKE_COMMAND} -E env LD_LIBRARY_PATH=${libdir} ${root}/${SG_BINDIR}/sg-stream --version)
    if(NOT last_output MATCHES "\nstreamguard [0-9]")
      message(FATAL_ERROR "${name}: the installed sg-stream --version says\n${last_output}")
    endif()
    set(page ${root}/${SG_MANDIR}/man1/sg-stream.1)
    if(NOT EXISTS ${page})
      message(FATAL_ERROR "${name}: no man page at ${page}")
    endif()
    if(MAN)
      run(${CMAKE_COMMAND} -E env LC_ALL=C MANWIDTH=80 ${MAN} -M ${root}/${SG_MANDIR} -P cat sg-stream)
      if(NOT last_output MATCHES "sg-stream - stream one guarded operation")
        message(FATAL_ERROR "${name}: `man sg-stream` shows\n${last_output}")
      endif()
      message(STATUS "${name}: man sg-stream works")
    else()
      message(STATUS "${name}: ${page} is installed (no man program to read it)")
    endif()
  endif()
endfunction()

# The configured prefix is not where either tree goes.
set(prefix ${SG_WORK_DIR}/prefix)
set(destdir ${SG_WORK_DIR}/destdir)
if(prefix STREQUAL SG_INSTALL_PREFIX)
  message(FATAL_ERROR "the build is configured to install to ${prefix}, the test's own prefix")
endif()

run(${CMAKE_COMMAND} --install ${SG_BUILD_DIR} --prefix ${prefix})
check_tree(prefix ${prefix})

run(${CMAKE_COMMAND} -E env DESTDIR=${destdir} ${CMAKE_COMMAND} --install ${SG_BUILD_DIR})
if(NOT EXISTS ${destdir}${SG_INSTALL_PREFIX}/${SG_LIBDIR}/pkgconfig/streamguard.pc)
  message(FATAL_ERROR "DESTDIR=${destdir}: nothing under ${destdir}${SG_INSTALL_PREFIX}")
endif()
check_tree(destdir ${destdir}${SG_INSTALL_PREFIX})
