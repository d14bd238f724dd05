# The two build-time dependencies of mgerun-native that the build fetches itself, each pinned by version and
# sha256 (native/README.md says where each comes from and why):
#   - the onnxruntime C API header, from the npm package com.github.asus4.onnxruntime@0.4.9 (no PyPI wheel ships it);
#   - nlohmann-json (header-only), Debian's nlohmann-json3-dev 3.11.2-2, when no installed one is found.
# A checksum that differs stops the build with one line.

set(MGERUN_ORT_NPM_PACKAGE "com.github.asus4.onnxruntime" CACHE STRING "npm package holding onnxruntime_c_api.h")
set(MGERUN_ORT_NPM_VERSION "0.4.9" CACHE STRING "its version")
set(MGERUN_ORT_NPM_SHA256 "e59788788818fdde1b2e522e766a21ba0f7d8391de55737abf81e32cc801785d"
    CACHE STRING "sha256 of its npm tarball")
set(MGERUN_ORT_INCLUDE_DIR "" CACHE PATH "a folder holding onnxruntime_c_api.h (skips the npm download)")
set(MGERUN_ORT_TARBALL "" CACHE FILEPATH "the npm tarball, already downloaded (checked against the pinned sha256)")

set(MGERUN_JSON_DEB_VERSION "3.11.2-2" CACHE STRING "Debian's nlohmann-json3-dev version fetched when none is installed")
set(MGERUN_JSON_DEB_SHA256 "ec57940def6b6186c30be0e0ee81d1e58f86d11a54a145b28686a1e3e4aae801"
    CACHE STRING "sha256 of that .deb")
set(MGERUN_JSON_INCLUDE_DIR "" CACHE PATH "a folder holding nlohmann/json.hpp (skips the search and the download)")

set(_deps "${CMAKE_BINARY_DIR}/_deps")
file(MAKE_DIRECTORY "${_deps}")

function(_mgerun_check_sha256 file expected what)
  file(SHA256 "${file}" actual)
  if(NOT actual STREQUAL expected)
    message(FATAL_ERROR "${what}: sha256 ${actual} differs from the pinned ${expected}: refusing to build with it")
  endif()
endfunction()

# ---- onnxruntime_c_api.h
if(MGERUN_ORT_INCLUDE_DIR)
  if(NOT EXISTS "${MGERUN_ORT_INCLUDE_DIR}/onnxruntime_c_api.h")
    message(FATAL_ERROR "MGERUN_ORT_INCLUDE_DIR=${MGERUN_ORT_INCLUDE_DIR} holds no onnxruntime_c_api.h")
  endif()
  set(MGERUN_ORT_HEADERS "${MGERUN_ORT_INCLUDE_DIR}")
else()
  set(MGERUN_ORT_HEADERS "${_deps}/ort/include")
  if(NOT EXISTS "${MGERUN_ORT_HEADERS}/onnxruntime_c_api.h")
    set(_tgz "${MGERUN_ORT_TARBALL}")
    if(NOT _tgz)
      set(_tgz "${_deps}/${MGERUN_ORT_NPM_PACKAGE}-${MGERUN_ORT_NPM_VERSION}.tgz")
    endif()
    if(NOT EXISTS "${_tgz}")
      find_program(MGERUN_NPM npm)
      if(NOT MGERUN_NPM)
        message(FATAL_ERROR "onnxruntime_c_api.h: npm is not installed; install npm, or give "
                            "-DMGERUN_ORT_INCLUDE_DIR=DIR (a folder holding onnxruntime_c_api.h)")
      endif()
      message(STATUS "fetching ${MGERUN_ORT_NPM_PACKAGE}@${MGERUN_ORT_NPM_VERSION} (npm pack) for onnxruntime_c_api.h")
      execute_process(
        COMMAND "${MGERUN_NPM}" pack "${MGERUN_ORT_NPM_PACKAGE}@${MGERUN_ORT_NPM_VERSION}" --silent
                --pack-destination "${_deps}"
        WORKING_DIRECTORY "${_deps}" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_VARIABLE _err)
      if(NOT _rc EQUAL 0 OR NOT EXISTS "${_tgz}")
        message(FATAL_ERROR "npm pack ${MGERUN_ORT_NPM_PACKAGE}@${MGERUN_ORT_NPM_VERSION} failed: ${_err}")
      endif()
    endif()
    _mgerun_check_sha256("${_tgz}" "${MGERUN_ORT_NPM_SHA256}"
                         "${MGERUN_ORT_NPM_PACKAGE}@${MGERUN_ORT_NPM_VERSION} (${_tgz})")
    set(_in "package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers")
    file(REMOVE_RECURSE "${_deps}/ort/x")
    file(MAKE_DIRECTORY "${_deps}/ort/x")
    execute_process(
      COMMAND "${CMAKE_COMMAND}" -E tar xzf "${_tgz}" "${_in}/onnxruntime_c_api.h" "${_in}/onnxruntime_ep_c_api.h"
              "${_in}/onnxruntime_error_code.h"
      WORKING_DIRECTORY "${_deps}/ort/x" RESULT_VARIABLE _rc ERROR_VARIABLE _err)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "cannot extract onnxruntime_c_api.h from ${_tgz}: ${_err}")
    endif()
    file(MAKE_DIRECTORY "${MGERUN_ORT_HEADERS}")
    foreach(_h onnxruntime_ep_c_api.h onnxruntime_error_code.h onnxruntime_c_api.h)
      file(COPY "${_deps}/ort/x/${_in}/${_h}" DESTINATION "${MGERUN_ORT_HEADERS}")
    endforeach()
    file(REMOVE_RECURSE "${_deps}/ort/x")
  endif()
endif()

# ---- nlohmann/json.hpp
if(MGERUN_JSON_INCLUDE_DIR)
  if(NOT EXISTS "${MGERUN_JSON_INCLUDE_DIR}/nlohmann/json.hpp")
    message(FATAL_ERROR "MGERUN_JSON_INCLUDE_DIR=${MGERUN_JSON_INCLUDE_DIR} holds no nlohmann/json.hpp")
  endif()
  set(MGERUN_JSON_HEADERS "${MGERUN_JSON_INCLUDE_DIR}")
else()
  find_package(nlohmann_json 3.11 QUIET CONFIG)
  if(nlohmann_json_FOUND)
    get_target_property(MGERUN_JSON_HEADERS nlohmann_json::nlohmann_json INTERFACE_INCLUDE_DIRECTORIES)
  else()
    set(MGERUN_JSON_HEADERS "${_deps}/json/usr/include")
    if(NOT EXISTS "${MGERUN_JSON_HEADERS}/nlohmann/json.hpp")
      set(_deb "${_deps}/nlohmann-json3-dev_${MGERUN_JSON_DEB_VERSION}_all.deb")
      if(NOT EXISTS "${_deb}")
        find_program(MGERUN_APT_GET apt-get)
        if(NOT MGERUN_APT_GET)
          message(FATAL_ERROR "nlohmann/json.hpp: not installed and no apt-get to fetch nlohmann-json3-dev; give "
                              "-DMGERUN_JSON_INCLUDE_DIR=DIR (a folder holding nlohmann/json.hpp, 3.11)")
        endif()
        message(STATUS "fetching nlohmann-json3-dev=${MGERUN_JSON_DEB_VERSION} (apt-get download)")
        execute_process(COMMAND "${MGERUN_APT_GET}" download "nlohmann-json3-dev=${MGERUN_JSON_DEB_VERSION}"
                        WORKING_DIRECTORY "${_deps}" RESULT_VARIABLE _rc OUTPUT_QUIET ERROR_VARIABLE _err)
        if(NOT _rc EQUAL 0 OR NOT EXISTS "${_deb}")
          message(FATAL_ERROR "apt-get download nlohmann-json3-dev=${MGERUN_JSON_DEB_VERSION} failed: ${_err}")
        endif()
      endif()
      _mgerun_check_sha256("${_deb}" "${MGERUN_JSON_DEB_SHA256}" "nlohmann-json3-dev ${MGERUN_JSON_DEB_VERSION} (${_deb})")
      find_program(MGERUN_DPKG_DEB dpkg-deb REQUIRED)
      execute_process(COMMAND "${MGERUN_DPKG_DEB}" -x "${_deb}" "${_deps}/json" RESULT_VARIABLE _rc ERROR_VARIABLE _err)
      if(NOT _rc EQUAL 0)
        message(FATAL_ERROR "cannot unpack ${_deb}: ${_err}")
      endif()
    endif()
  endif()
endif()
