// The stored-ZIP reader of the bundle (docs/bundle.md "Layout", "What a reader checks" 1-2): the archive is
// mapped read-only and every record is read with its bounds checked against the file. It reads what Python's
// zipfile reads (the end record searched in the last 64 KiB, ZIP64 records, an archive with bytes before it),
// so mgerun and mgerun-native agree on which files are archives; it reads members only stored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace mgerun {

// The archive is not one (its reason, as zipfile words it: "File is not a zip file", ...).
struct ZipError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ZipEntry {
  std::string name;       // as zipfile names it: UTF-8 (flag bit 11) or cp437, cut at a NUL
  std::string orig_name;  // before the cut at a NUL
  uint16_t version_needed = 0, flags = 0, method = 0;
  uint32_t crc = 0;
  uint64_t compressed_size = 0, size = 0;
  int64_t header_offset = 0;  // of its local header in the file (bytes before the archive counted); a crafted
                              // directory may give a negative one, refused when the member is read
};

class Zip {
 public:
  // Maps the file and reads its central directory. Throws ZipError (not an archive), std::system_error (I/O).
  explicit Zip(const std::string& path);
  ~Zip();
  Zip(const Zip&) = delete;
  Zip& operator=(const Zip&) = delete;

  const std::vector<ZipEntry>& entries() const { return entries_; }
  uint64_t file_size() const { return size_; }

  // A member's data (`length`: the smaller of its two sizes, as zipfile reads a stored member), after its local header is checked as zipfile checks it when it
  // opens a member (signature, the same name, no encryption or patched data, a stored member). Throws ZipError.
  const uint8_t* member_data(const ZipEntry& e, uint64_t* length) const;

  // The whole file's bytes (mapped).
  const uint8_t* bytes() const { return map_; }

 private:
  int fd_ = -1;
  uint8_t* map_ = nullptr;
  uint64_t size_ = 0;
  std::vector<ZipEntry> entries_;
};

// zlib's CRC-32 (the ZIP checksum) of data, continued from crc (0 to start).
uint32_t crc32_update(uint32_t crc, const uint8_t* data, std::size_t size);

}  // namespace mgerun
