#include "zip.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>

#include "json.h"

namespace mgerun {

namespace {

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50, kLocator64Sig = 0x07064b50;
constexpr uint64_t kEndSize = 22, kEnd64Size = 56, kLocatorSize = 20, kCentralSize = 46, kLocalSize = 30;
constexpr uint64_t kMaxComment = 1 << 16;
constexpr uint16_t kMaxExtractVersion = 63;

uint16_t u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t u64(const uint8_t* p) { return static_cast<uint64_t>(u32(p)) | (static_cast<uint64_t>(u32(p + 4)) << 32); }

// cp437's characters 0x80-0xFF: the names of members without the UTF-8 flag, as zipfile decodes them
const uint16_t kCp437High[128] = {
    0x00c7, 0x00fc, 0x00e9, 0x00e2, 0x00e4, 0x00e0, 0x00e5, 0x00e7, 0x00ea, 0x00eb, 0x00e8, 0x00ef, 0x00ee,
    0x00ec, 0x00c4, 0x00c5, 0x00c9, 0x00e6, 0x00c6, 0x00f4, 0x00f6, 0x00f2, 0x00fb, 0x00f9, 0x00ff, 0x00d6,
    0x00dc, 0x00a2, 0x00a3, 0x00a5, 0x20a7, 0x0192, 0x00e1, 0x00ed, 0x00f3, 0x00fa, 0x00f1, 0x00d1, 0x00aa,
    0x00ba, 0x00bf, 0x2310, 0x00ac, 0x00bd, 0x00bc, 0x00a1, 0x00ab, 0x00bb, 0x2591, 0x2592, 0x2593, 0x2502,
    0x2524, 0x2561, 0x2562, 0x2556, 0x2555, 0x2563, 0x2551, 0x2557, 0x255d, 0x255c, 0x255b, 0x2510, 0x2514,
    0x2534, 0x252c, 0x251c, 0x2500, 0x253c, 0x255e, 0x255f, 0x255a, 0x2554, 0x2569, 0x2566, 0x2560, 0x2550,
    0x256c, 0x2567, 0x2568, 0x2564, 0x2565, 0x2559, 0x2558, 0x2552, 0x2553, 0x256b, 0x256a, 0x2518, 0x250c,
    0x2588, 0x2584, 0x258c, 0x2590, 0x2580, 0x03b1, 0x00df, 0x0393, 0x03c0, 0x03a3, 0x03c3, 0x00b5, 0x03c4,
    0x03a6, 0x0398, 0x03a9, 0x03b4, 0x221e, 0x03c6, 0x03b5, 0x2229, 0x2261, 0x00b1, 0x2265, 0x2264, 0x2320,
    0x2321, 0x00f7, 0x2248, 0x00b0, 0x2219, 0x00b7, 0x221a, 0x207f, 0x00b2, 0x25a0, 0x00a0};

// A member name's bytes as zipfile decodes them. Throws ZipError for bad UTF-8 under the UTF-8 flag.
std::string decode_name(const std::string& raw, bool utf8) {
  if (utf8) {
    if (!valid_utf8(raw)) throw ZipError("a member name is not valid UTF-8");
    return raw;
  }
  std::string out;
  for (unsigned char c : raw) {
    if (c < 0x80)
      out += static_cast<char>(c);
    else
      append_utf8(out, kCp437High[c - 0x80]);
  }
  return out;
}

struct CrcTables {
  uint32_t t[8][256];
  CrcTables() {
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; ++n)
      for (int k = 1; k < 8; ++k) t[k][n] = (t[k - 1][n] >> 8) ^ t[0][t[k - 1][n] & 0xFF];
  }
};

const CrcTables& crc_tables() {
  static const CrcTables tables;
  return tables;
}

}  // namespace

uint32_t crc32_update(uint32_t crc, const uint8_t* p, std::size_t n) {
  const auto& t = crc_tables().t;
  uint32_t c = ~crc;
  while (n >= 8) {  // eight bytes a step (slicing by 8)
    uint32_t lo = c ^ u32(p);
    uint32_t hi = u32(p + 4);
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^ t[3][hi & 0xFF] ^
        t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) c = t[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
  return ~c;
}

Zip::Zip(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), path);
  struct stat st;
  if (::fstat(fd_, &st) != 0) throw std::system_error(errno, std::generic_category(), path);
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ > 0) {
    void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (m == MAP_FAILED) throw std::system_error(errno, std::generic_category(), path);
    map_ = static_cast<uint8_t*>(m);
  }
  const uint8_t* b = map_;
  if (size_ < kEndSize) throw ZipError("File is not a zip file");

  // the end of central directory record: last in the file, or followed by a comment (searched as zipfile does)
  uint64_t end_at;
  if (u32(b + size_ - kEndSize) == kEndSig && u16(b + size_ - 2) == 0) {
    end_at = size_ - kEndSize;
  } else {
    uint64_t from = size_ > kMaxComment + kEndSize ? size_ - kMaxComment - kEndSize : 0;
    uint64_t found = UINT64_MAX;
    for (uint64_t i = size_ - 4 + 1; i-- > from;) {
      if (u32(b + i) == kEndSig) {
        found = i;
        break;
      }
    }
    if (found == UINT64_MAX || found + kEndSize > size_) throw ZipError("File is not a zip file");
    end_at = found;
  }
  const uint8_t* e = b + end_at;
  uint64_t cd_size = u32(e + 12), cd_offset = u32(e + 16);
  bool zip64 = false;
  // a ZIP64 end record: its locator just before the end record, the record just before the locator
  if (end_at >= kLocatorSize && u32(b + end_at - kLocatorSize) == kLocator64Sig) {
    const uint8_t* loc = b + end_at - kLocatorSize;
    if (u32(loc + 4) != 0 || u32(loc + 16) > 1) throw ZipError("zipfiles that span multiple disks are not supported");
    if (end_at >= kLocatorSize + kEnd64Size && u32(b + end_at - kLocatorSize - kEnd64Size) == kEnd64Sig) {
      const uint8_t* r = b + end_at - kLocatorSize - kEnd64Size;
      cd_size = u64(r + 40);
      cd_offset = u64(r + 48);
      zip64 = true;
    }
  }
  // bytes before the archive ("concat"): where the directory is against where the end record says it is
  __int128 concat = static_cast<__int128>(end_at) - cd_size - cd_offset;
  if (zip64) concat -= kEnd64Size + kLocatorSize;
  __int128 start = static_cast<__int128>(cd_offset) + concat;
  if (start < 0) throw ZipError("Bad offset for central directory");
  // the directory's bytes as far as the file holds them
  uint64_t dir_begin = static_cast<uint64_t>(start) < size_ ? static_cast<uint64_t>(start) : size_;
  uint64_t dir_end = size_ - dir_begin < cd_size ? size_ : dir_begin + cd_size;
  uint64_t pos = dir_begin;
  unsigned __int128 total = 0;
  auto take = [&](uint64_t n) {  // up to n bytes of the directory from pos, as a short read gives them
    uint64_t avail = dir_end - pos;
    uint64_t got = n < avail ? n : avail;
    std::string s(reinterpret_cast<const char*>(b + pos), got);
    pos += got;
    return s;
  };
  while (total < cd_size) {
    if (dir_end - pos < kCentralSize) throw ZipError("Truncated central directory");
    const uint8_t* c = b + pos;
    if (u32(c) != kCentralSig) throw ZipError("Bad magic number for central directory");
    pos += kCentralSize;
    ZipEntry z;
    z.version_needed = c[6];  // zipfile reads one byte: the version, the next byte the host system
    z.flags = u16(c + 8);
    z.method = u16(c + 10);
    z.crc = u32(c + 16);
    z.compressed_size = u32(c + 20);
    z.size = u32(c + 24);
    uint16_t name_len = u16(c + 28), extra_len = u16(c + 30), comment_len = u16(c + 32);
    uint64_t header_offset = u32(c + 42);
    std::string raw = take(name_len);
    std::string extra = take(extra_len);
    take(comment_len);
    z.orig_name = decode_name(raw, z.flags & 0x800);
    if (z.version_needed > kMaxExtractVersion) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "zip file version %.1f", z.version_needed / 10.0);
      throw ZipError(buf);
    }
    // ZIP64 extra field: the 64-bit sizes and offset where the 32-bit ones are all ones
    std::size_t x = 0;
    while (extra.size() - x >= 4) {
      uint16_t tag = u16(reinterpret_cast<const uint8_t*>(extra.data() + x));
      uint16_t len = u16(reinterpret_cast<const uint8_t*>(extra.data() + x + 2));
      if (len + 4u > extra.size() - x) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "Corrupt extra field %04x (size=%u)", tag, static_cast<unsigned>(len));
        throw ZipError(buf);
      }
      if (tag == 0x0001) {
        const uint8_t* d = reinterpret_cast<const uint8_t*>(extra.data() + x + 4);
        uint16_t left = len;
        auto field = [&](uint64_t& v, const char* what) {
          if (left < 8) throw ZipError(std::string("Corrupt zip64 extra field. ") + what + " not found.");
          v = u64(d);
          d += 8;
          left -= 8;
        };
        if (z.size == 0xFFFFFFFFu) field(z.size, "File size");
        if (z.compressed_size == 0xFFFFFFFFu) field(z.compressed_size, "Compress size");
        if (header_offset == 0xFFFFFFFFu) field(header_offset, "Header offset");
      }
      x += 4u + len;
    }
    __int128 at = static_cast<__int128>(header_offset) + concat;
    z.header_offset = at < INT64_MIN ? INT64_MIN : at > INT64_MAX ? INT64_MAX : static_cast<int64_t>(at);
    z.name = z.orig_name.substr(0, z.orig_name.find('\0'));
    entries_.push_back(std::move(z));
    total += kCentralSize + name_len + extra_len + comment_len;
  }
}

Zip::~Zip() {
  if (map_) ::munmap(map_, size_);
  if (fd_ >= 0) ::close(fd_);
}

const uint8_t* Zip::member_data(const ZipEntry& e, uint64_t* length) const {
  if (e.header_offset < 0) throw ZipError("[Errno 22] Invalid argument");
  uint64_t at = static_cast<uint64_t>(e.header_offset);
  if (at > size_ || size_ - at < kLocalSize) throw ZipError("Truncated file header");
  const uint8_t* h = map_ + at;
  if (u32(h) != kLocalSig) throw ZipError("Bad magic number for file header");
  uint64_t name_len = u16(h + 26), extra_len = u16(h + 28);
  uint64_t left = size_ - at - kLocalSize;
  std::string raw(reinterpret_cast<const char*>(h + kLocalSize), name_len < left ? name_len : left);
  if (e.flags & 0x20) throw ZipError("compressed patched data (flag bit 5)");
  if (e.flags & 0x40) throw ZipError("strong encryption (flag bit 6)");
  if (decode_name(raw, u16(h + 6) & 0x800) != e.orig_name)
    throw ZipError("File name in directory " + py_repr(e.orig_name) + " and header " + py_bytes_repr(raw) +
                   " differ.");
  if (e.flags & 0x1) throw ZipError("File " + py_repr(e.name) + " is encrypted, password required for extraction");
  if (e.method != 0) throw ZipError("compression method " + std::to_string(e.method) + " (members are stored)");
  uint64_t data_at = at + kLocalSize + name_len + extra_len;
  // zipfile reads a stored member's data until either size ends (the compressed one, or the file size)
  uint64_t want = e.compressed_size < e.size ? e.compressed_size : e.size;
  if (data_at > size_ || size_ - data_at < want) throw ZipError("");  // zipfile's EOFError, which says nothing
  *length = want;
  return map_ + data_at;
}

}  // namespace mgerun
