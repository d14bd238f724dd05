# Embed a file's bytes in the program: writes OUT, a C++ source defining
#   extern const unsigned char NAME[]; extern const std::size_t NAME_size;
# (the file itself stays where the repository keeps it: nothing is copied into native/).
function(mgerun_embed_file file name out)
  if(NOT EXISTS "${file}")
    message(FATAL_ERROR "${file} not found: mgerun-native embeds it (build from a checkout of the repository, "
                        "or give its path with -DMGERUN_MANIFEST_SCHEMA=PATH)")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${file}")
  file(READ "${file}" hex HEX)
  file(SIZE "${file}" size)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n"
         bytes "${bytes}")
  file(CONFIGURE OUTPUT "${out}" CONTENT "// generated from ${file} by native/cmake/embed.cmake\n#include <cstddef>\n\
namespace mgerun {\nextern const unsigned char ${name}[] = {\n${bytes}0x00};\n\
extern const std::size_t ${name}_size = ${size};\n}  // namespace mgerun\n" @ONLY)
endfunction()
