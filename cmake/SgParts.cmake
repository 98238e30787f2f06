# The parts a build of streamguard takes (README, "Build options"), and
# what a program, a test or a benchmark needs of them.
#
# A part is one SG_WITH_* option (curl, h2, ledger, postgresql,
# eventstream, otel: the exporter's own library, libstreamguard-otel), or
# one of the third-party libraries a program or a test calls itself
# (libcurl, nghttp2, cares, openssl, zlib, libpq, found beside the options
# whatever they say).  SG_HAVE_<part> is true when the
# build has it.  What is not built for want of a part is named at
# configure time, once, in one line per directory.

# sg_parts_of(<out> <file>... [DIRS <dir>...]) - the parts <file>s use:
# read from their #include lines (following quoted includes that resolve
# beside the includer or in one of DIRS), from the names of the library's
# event-stream decoder they call, and from a line "sg-parts: <part>..."
# (in a comment) where a file reaches a part its includes do not show: a
# provider profile chosen by name at run time.
function(sg_parts_of out)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "DIRS")
  set(rules
      # the library's parts: their public headers and internal folders
      "<streamguard/curl(_multi)?\\.h>|<streamguard/easy\\.h>|\"curl/" curl
      "<streamguard/h2\\.h>|\"h2/" h2
      "\"ledger/pg\\.h\"" postgresql
      "<streamguard/health_pg\\.h>" postgresql
      "<streamguard/ledger(_record)?\\.h>|\"ledger/" ledger
      "\"transport/" transport
      "<streamguard/otel(_trace)?\\.h>|\"otel/" otel
      "sg_es_[a-z]|SG_FORMAT_EVENTSTREAM" eventstream
      # what the file calls itself
      "<curl/" libcurl
      "<nghttp2/" nghttp2
      "<ares" cares
      "<openssl/" openssl
      "<zlib\\.h>" zlib
      "<libpq-fe\\.h>" libpq)
  set(parts "")
  set(todo ${arg_UNPARSED_ARGUMENTS})
  set(seen "")
  while(todo)
    list(POP_FRONT todo file)
    get_filename_component(file ${file} ABSOLUTE)
    if(file IN_LIST seen OR NOT EXISTS ${file})
      continue()
    endif()
    list(APPEND seen ${file})
    get_filename_component(dir ${file} DIRECTORY)
    file(STRINGS ${file} lines
         REGEX "#[ \t]*include|sg_es_[a-z]|SG_FORMAT_EVENTSTREAM|sg-parts:")
    foreach(line IN LISTS lines)
      if(line MATCHES "sg-parts:[ \t]*([a-z0-9 ]+)")
        string(STRIP "${CMAKE_MATCH_1}" named)
        string(REPLACE " " ";" named "${named}")
        list(APPEND parts ${named})
      endif()
      set(i 0)
      list(LENGTH rules n)
      while(i LESS n)
        list(GET rules ${i} pattern)
        math(EXPR j "${i} + 1")
        list(GET rules ${j} part)
        if(line MATCHES "${pattern}")
          list(APPEND parts ${part})
        endif()
        math(EXPR i "${i} + 2")
      endwhile()
      if(line MATCHES "#[ \t]*include[ \t]*\"([^\"]+)\"")
        set(bases ${dir} ${arg_DIRS})
        foreach(base IN LISTS bases)
          if(EXISTS ${base}/${CMAKE_MATCH_1})
            list(APPEND todo ${base}/${CMAKE_MATCH_1})
            break()
          endif()
        endforeach()
      endif()
    endforeach()
  endwhile()
  list(REMOVE_DUPLICATES parts)
  set(${out} ${parts} PARENT_SCOPE)
endfunction()

# sg_parts_missing(<out> <part>...) - those of <part>s this build lacks.
function(sg_parts_missing out)
  set(missing "")
  foreach(part IN LISTS ARGN)
    if(NOT SG_HAVE_${part})
      list(APPEND missing ${part})
    endif()
  endforeach()
  set(${out} ${missing} PARENT_SCOPE)
endfunction()

# sg_parts_link(<target> <part>...) - links the third-party libraries
# among <part>s into <target> (the library's own come with it).
function(sg_parts_link target)
  foreach(part IN LISTS ARGN)
    if(DEFINED SG_TARGETS_${part})
      target_link_libraries(${target} PRIVATE ${SG_TARGETS_${part}})
    endif()
  endforeach()
endfunction()

# sg_parts_check(<ok> <what> <file>... [DIRS <dir>...] [NEEDS <part>...])
# - whether this build has every part <file>s use, and the NEEDS parts
# (what the files reach at run time: a provider profile's framing); when
# not, <what> is added to the directory's list of what is left out
# (sg_parts_report).  <ok>_PARTS: the parts, for sg_parts_link.
function(sg_parts_check ok what)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "DIRS;NEEDS")
  sg_parts_of(parts ${arg_UNPARSED_ARGUMENTS} DIRS ${arg_DIRS})
  list(APPEND parts ${arg_NEEDS})
  list(REMOVE_DUPLICATES parts)
  sg_parts_missing(missing ${parts})
  if(missing)
    string(REPLACE ";" "," missing "${missing}")
    set_property(DIRECTORY APPEND PROPERTY SG_LEFT_OUT "${what} (${missing})")
    set(${ok} FALSE PARENT_SCOPE)
  else()
    set(${ok} TRUE PARENT_SCOPE)
  endif()
  set(${ok}_PARTS ${parts} PARENT_SCOPE)
endfunction()

# sg_parts_report() - one line naming what this directory left out.
function(sg_parts_report)
  get_property(left DIRECTORY PROPERTY SG_LEFT_OUT)
  if(left)
    file(RELATIVE_PATH dir ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
    string(REPLACE ";" ", " left "${left}")
    message(STATUS "${dir}/: not built for want of a part: ${left}")
  endif()
endfunction()
