# The layers of proxy/, bottom to top: a folder may include its own files
# and those of the folders on lower lines, never a folder on its own line
# or a higher one. Run by the build (cmake -P, before the library compiles)
# over every source; a file that includes upwards fails the build, naming
# the file, the include and what its folder may use.
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
  "budget fleet translate trace resume"
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
  foreach(include IN LISTS includes)
    if(NOT include MATCHES "[\"<](\\.\\./)*([a-z_]+)/[^\">]*[\">]")
      continue()
    endif()
    set(target "${CMAKE_MATCH_2}")
    if(target STREQUAL folder OR NOT DEFINED level_of_${target})
      continue()
    endif()
    if(NOT level_of_${target} LESS level_of_${folder})
      string(STRIP "${include}" include)
      string(APPEND violations
        "\n  proxy/${source}: ${include} (${folder}/ may include only the layers below it)")
    endif()
  endforeach()
endforeach()

if(violations)
  list(JOIN layer_lines " < " order)
  message(FATAL_ERROR "includes that point up the layers (${order}):${violations}")
endif()
if(STAMP)
  get_filename_component(stamp_dir "${STAMP}" DIRECTORY)
  file(MAKE_DIRECTORY "${stamp_dir}")
  file(TOUCH "${STAMP}")
endif()
