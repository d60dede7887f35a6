# Turns the admin listener's status page into C++ string literals
# (server/status_page.hpp): its own files in proxy/server/status_page/ and
# uPlot as `npm ci` installed it there (package-lock.json pins it). Each
# file becomes a raw string whose delimiter none of them may contain.
#   cmake -DPAGE=<proxy/server/status_page> -DOUTPUT=<file.cpp> -P scripts/embed_status_page.cmake
set(assets
  "/|html|index.html"
  "/assets/status.js|js|status.js"
  "/assets/status.css|css|status.css"
  "/assets/uplot.js|js|node_modules/uplot/dist/uPlot.iife.min.js"
  "/assets/uplot.css|css|node_modules/uplot/dist/uPlot.min.css")
set(delimiter "tgpage")
set(body "")
foreach(asset IN LISTS assets)
  string(REPLACE "|" ";" fields "${asset}")
  list(GET fields 0 path)
  list(GET fields 1 kind)
  list(GET fields 2 file)
  if(NOT EXISTS "${PAGE}/${file}")
    message(FATAL_ERROR "${PAGE}/${file} is missing: `npm ci` in ${PAGE} installs uPlot "
                        "(the build runs it; npm comes with scripts/setup)")
  endif()
  file(READ "${PAGE}/${file}" content)
  string(FIND "${content}" ")${delimiter}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${PAGE}/${file} holds the raw string's end, )${delimiter}\"")
  endif()
  string(APPEND body "    {\"${path}\", \"${kind}\", R\"${delimiter}(${content})${delimiter}\"},\n")
endforeach()
list(LENGTH assets count)
file(WRITE ${OUTPUT} "// Generated from proxy/server/status_page/; do not edit.\n"
  "#include \"server/status_page.hpp\"\nnamespace tokengate {\n"
  "const page_asset status_page_assets[] = {\n${body}};\n"
  "const std::size_t status_page_asset_count = ${count};\n}\n")
