# cmake -DINPUT=<file> -DOUTPUT=<cpp> -DNAMESPACE=<ns> -DFUNCTION=<name> -P embed_file.cmake
# Writes a .cpp defining `std::string_view <ns>::<name>()` with the file's bytes,
# so the binary serves the page without reading anything at run time.
file(READ "${INPUT}" content HEX)
string(LENGTH "${content}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${content}")
string(REGEX REPLACE "(([^,]*,){16})" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp" "// Generated from ${INPUT}; do not edit.\n#include <string_view>\n\nnamespace ${NAMESPACE} {\nnamespace {\nconstexpr char kBytes[] = {\n${bytes}\n'\\0'};\n}  // namespace\nstd::string_view ${FUNCTION}() { return std::string_view(kBytes, ${size}); }\n}  // namespace ${NAMESPACE}\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
