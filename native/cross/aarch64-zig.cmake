# CMake toolchain file: build mgerun-native for aarch64 Linux with zig's C/C++ compiler (clang, libc++ linked
# statically) against glibc 2.17's symbols, so that the binary runs on any aarch64 Linux whose glibc is 2.17 or
# newer (onnxruntime's own library needs 2.28) and needs no libstdc++ of its own.
#
#   native/cross/build-aarch64.sh --zig BUILD_DIR
#
# MGERUN_ZIG_BIN is a folder holding the wrappers build-aarch64.sh writes (zig-cc, zig-c++, zig-ar,
# zig-ranlib: `python3 -m ziglang cc -target aarch64-linux-gnu.2.17 ...`, ziglang from PyPI); MGERUN_AARCH64_DEPS
# as in aarch64-linux-gnu.cmake (the target's static libcrypto.a from Debian's arm64 libssl-dev).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES MGERUN_AARCH64_DEPS MGERUN_ZIG_BIN)
foreach(_var MGERUN_AARCH64_DEPS MGERUN_ZIG_BIN)
  if(NOT ${_var} AND DEFINED ENV{${_var}})
    set(${_var} "$ENV{${_var}}")
  endif()
endforeach()

set(CMAKE_C_COMPILER "${MGERUN_ZIG_BIN}/zig-cc")
set(CMAKE_CXX_COMPILER "${MGERUN_ZIG_BIN}/zig-c++")
set(CMAKE_AR "${MGERUN_ZIG_BIN}/zig-ar" CACHE FILEPATH "archiver")
set(CMAKE_RANLIB "${MGERUN_ZIG_BIN}/zig-ranlib" CACHE FILEPATH "ranlib")

# only the unpacked target packages: zig brings its own C library stubs and C++ library
set(CMAKE_FIND_ROOT_PATH "${MGERUN_AARCH64_DEPS}")
set(CMAKE_C_FLAGS_INIT "-isystem ${MGERUN_AARCH64_DEPS}/usr/include/aarch64-linux-gnu")
set(CMAKE_CXX_FLAGS_INIT "-isystem ${MGERUN_AARCH64_DEPS}/usr/include/aarch64-linux-gnu")
set(OPENSSL_ROOT_DIR "${MGERUN_AARCH64_DEPS}/usr")
set(OPENSSL_USE_STATIC_LIBS TRUE)

set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
