# Included by llama.cpp's CMakeLists right after its project() call, when
# scripts/serve_real_llm.sh compiles llama-cpp-python (CMAKE_PROJECT_llama.cpp_INCLUDE).
#
# llama-cpp-python forces LLAMA_BUILD_COMMON on (a cache variable set with FORCE), so
# llama.cpp also compiles its `common` utilities (argument parsing, chat-template parsers,
# JSON schema, an HTTP client with cpp-httplib) into libllama-common.so. The Python package
# never loads that library: its ctypes bindings open libllama, libggml* and (for image chat
# formats, not built here) libmtmd. A normal variable shadows the cache entry in llama.cpp's
# directory scope (option() leaves it alone under policy CMP0077), so neither common nor
# cpp-httplib is configured, built or installed. The libraries the bindings load are built
# from the same sources with the same flags as before.
set(LLAMA_BUILD_COMMON OFF)
