# Turns config/tokengate.yaml into a C++ string literal (a raw string with a
# delimiter that YAML will not contain).
file(READ ${INPUT} CONTENT)
file(WRITE ${OUTPUT} "// Generated from config/tokengate.yaml; do not edit.\n"
  "#include <string_view>\nnamespace tokengate {\n"
  "extern const std::string_view embedded_default_config;\n"
  "const std::string_view embedded_default_config = R\"tgyaml(${CONTENT})tgyaml\";\n}\n")
