# Turns each src/lock/scripts/NAME.lua into `extern const std::string_view k_NAME_lua`.
# The header comment of each script (KEYS, ARGV, returns) stays in the embedded
# text: Redis ignores Lua comments, and it keeps the SHA matching the file.
set(content "// Generated from src/lock/scripts/*.lua; do not edit.\n#include <string_view>\nnamespace rlock::lock::scripts {\n")
foreach(script ${SCRIPTS})
  get_filename_component(name ${script} NAME_WE)
  file(READ ${script} body)
  # Its SHA-1 too (what EVALSHA names it by), so that no process hashes 20 KB
  # of Lua at start-up: tests/unit checks it against util/sha1.
  string(SHA1 sha1 "${body}")
  string(APPEND content "extern const std::string_view k_${name}_lua;\nconst std::string_view k_${name}_lua = R\"rlock_lua(${body})rlock_lua\";\n")
  string(APPEND content "extern const std::string_view k_${name}_lua_sha1;\nconst std::string_view k_${name}_lua_sha1 = \"${sha1}\";\n")
endforeach()
string(APPEND content "}\n")
file(WRITE ${OUT} "${content}")
