# The layers of proxy/, bottom to top: a folder may include its own files
# and those of the folders on lower lines, never a folder on its own line
# or a higher one. Run by the build (cmake -P, before the library compiles)
# over every source; a file that includes upwards fails the build, naming
# the file, the include and what its folder may use.
#
# Inside one folder the files may include each other in any direction, but
# never in a loop: a header that reaches itself again through its folder's
# headers compiles only by the accident of #pragma once and the order of
# includes, so the check also fails on a cycle of includes in a folder and
# names its files in order.
#
#   cmake -DROOT=<dir holding proxy/> [-DSTAMP=<file>] -P cmake/check_layers.cmake
set(layer_lines
  "scan"
  "io"
  "http"
  "config"
  "metrics"
  "upstream redis"
  "stream"
  "routing"
  "budget fleet translate trace resume cache"
  "server"
  "engine bench"
  "cli")

get_filename_component(ROOT "${ROOT}" ABSOLUTE BASE_DIR "$ENV{PWD}")
set(level 0)
foreach(line IN LISTS layer_lines)
  string(REPLACE " " ";" folders "${line}")
  foreach(folder IN LISTS folders)
    set(level_of_${folder} ${level})
  endforeach()
  math(EXPR level "${level} + 1")
endforeach()

file(GLOB_RECURSE sources RELATIVE "${ROOT}/proxy" "${ROOT}/proxy/*.hpp" "${ROOT}/proxy/*.cpp")
if(NOT sources)
  message(FATAL_ERROR "no sources under ${ROOT}/proxy")
endif()
list(SORT sources)
foreach(source IN LISTS sources)
  set(is_source_${source} TRUE)
endforeach()
set(violations "")
foreach(source IN LISTS sources)
  if(NOT source MATCHES "^([a-z_]+)/")
    string(APPEND violations "\n  proxy/${source}: every source belongs to a layer's folder")
    continue()
  endif()
  set(folder "${CMAKE_MATCH_1}")
  if(NOT DEFINED level_of_${folder})
    string(APPEND violations "\n  proxy/${source}: folder ${folder}/ has no layer (cmake/check_layers.cmake)")
    continue()
  endif()
  # "folder/x.hpp", <folder/x.hpp> and "../folder/x.hpp" alike: each names
  # the folder it reaches into (a folder of no layer, boost/ or openssl/,
  # is not ours).
  file(STRINGS "${ROOT}/proxy/${source}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
  set(same_folder_includes_of_${source} "")
  foreach(include IN LISTS includes)
    if(NOT include MATCHES "[\"<](\\.\\./)*([a-z_]+)/([^\">]*)[\">]")
      continue()
    endif()
    set(target "${CMAKE_MATCH_2}")
    set(included "${CMAKE_MATCH_2}/${CMAKE_MATCH_3}")
    if(target STREQUAL folder)
      # Kept for the cycle search below; an include of a file that is not
      # there is the compiler's to report, and cannot close a loop.
      if(is_source_${included})
        list(APPEND same_folder_includes_of_${source} "${included}")
      endif()
      continue()
    endif()
    if(NOT DEFINED level_of_${target})
      continue()
    endif()
    if(NOT level_of_${target} LESS level_of_${folder})
      string(STRIP "${include}" include)
      string(APPEND violations
        "\n  proxy/${source}: ${include} (${folder}/ may include only the layers below it)")
    endif()
  endforeach()
endforeach()

# Cycles of includes inside a folder, by depth-first search over the
# same-folder includes gathered above. A file is "open" while the search is
# inside it and "done" once everything it includes has been searched; an
# include that leads back to an open file closes a loop, which is the open
# path from that file to here. Every such include is met exactly once, so
# each loop is reported once, from the file where the search (which takes
# the files in sorted order) first entered it. Where several loops share
# files, some may show only once the first ones are broken. A .cpp is
# included by no one, so a .cpp that includes its own header is never part
# of a loop. The search state lives in global properties because a CMake
# function sees only a copy of its caller's variables.
function(search_includes_from file)
  set_property(GLOBAL PROPERTY state_of_${file} open)
  set_property(GLOBAL APPEND PROPERTY open_path "${file}")
  foreach(included IN LISTS same_folder_includes_of_${file})
    get_property(state GLOBAL PROPERTY state_of_${included})
    if(state STREQUAL "open")
      get_property(open_path GLOBAL PROPERTY open_path)
      list(FIND open_path "${included}" start)
      list(SUBLIST open_path ${start} -1 loop)
      list(APPEND loop "${included}")
      list(TRANSFORM loop PREPEND "proxy/")
      list(JOIN loop " -> " loop)
      string(REGEX MATCH "^[a-z_]+/" folder "${file}")
      set_property(GLOBAL APPEND_STRING PROPERTY cycles
        "\n  ${loop} (a cycle inside ${folder})")
    elseif(NOT state STREQUAL "done")
      search_includes_from("${included}")
    endif()
  endforeach()
  get_property(open_path GLOBAL PROPERTY open_path)
  list(POP_BACK open_path)
  set_property(GLOBAL PROPERTY open_path "${open_path}")
  set_property(GLOBAL PROPERTY state_of_${file} done)
endfunction()

foreach(source IN LISTS sources)
  get_property(state GLOBAL PROPERTY state_of_${source})
  if(NOT state)
    search_includes_from("${source}")
  endif()
endforeach()
get_property(cycles GLOBAL PROPERTY cycles)

if(violations OR cycles)
  set(report "")
  if(violations)
    list(JOIN layer_lines " < " order)
    string(APPEND report "includes that point up the layers (${order}):${violations}\n")
  endif()
  if(cycles)
    string(APPEND report "includes that go round in a loop inside a folder:${cycles}\n")
  endif()
  message(FATAL_ERROR "${report}")
endif()
if(STAMP)
  get_filename_component(stamp_dir "${STAMP}" DIRECTORY)
  file(MAKE_DIRECTORY "${stamp_dir}")
  file(TOUCH "${STAMP}")
endif()
