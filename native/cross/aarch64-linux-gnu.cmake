# CMake toolchain file: build mgerun-native for aarch64 Linux on an x86_64 Debian host with Debian's cross
# compiler (apt-get install g++-aarch64-linux-gnu: GCC 12, the same compiler as the native build).
#
#   cmake -S native -B build/aarch64 -DCMAKE_TOOLCHAIN_FILE=native/cross/aarch64-linux-gnu.cmake \
#         -DMGERUN_AARCH64_DEPS=DIR
#
# DIR holds target libraries unpacked from Debian's arm64 packages (usr/lib/aarch64-linux-gnu/libcrypto.a and
# the OpenSSL headers of libssl-dev:arm64); native/cross/build-aarch64.sh fetches and unpacks them. The C
# library and libstdc++ come from the cross compiler's own tree, /usr/aarch64-linux-gnu, which is also the
# directory qemu-user's -L takes to run the result on the host (docs/native.md).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# Read again by every try_compile: keep the variable there too.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES MGERUN_AARCH64_DEPS)
if(NOT MGERUN_AARCH64_DEPS AND DEFINED ENV{MGERUN_AARCH64_DEPS})
  set(MGERUN_AARCH64_DEPS "$ENV{MGERUN_AARCH64_DEPS}")
endif()

set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
if(MGERUN_AARCH64_DEPS)
  list(APPEND CMAKE_FIND_ROOT_PATH "${MGERUN_AARCH64_DEPS}")
  # Debian puts OpenSSL's per-architecture header (openssl/configuration.h) beside the others, in
  # usr/include/aarch64-linux-gnu.
  set(CMAKE_C_FLAGS_INIT "-isystem ${MGERUN_AARCH64_DEPS}/usr/include/aarch64-linux-gnu")
  set(CMAKE_CXX_FLAGS_INIT "-isystem ${MGERUN_AARCH64_DEPS}/usr/include/aarch64-linux-gnu")
  set(OPENSSL_ROOT_DIR "${MGERUN_AARCH64_DEPS}/usr")
endif()
set(OPENSSL_USE_STATIC_LIBS TRUE)

# Programs (cmake, npm, apt-get, dpkg-deb) are the host's; libraries, headers and CMake packages only the
# target's: a host package would put -isystem /usr/include (the x86_64 C library's headers) on the command line.
# nlohmann-json, header-only, then comes from the build's own pinned download (native/cmake/deps.cmake).
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
