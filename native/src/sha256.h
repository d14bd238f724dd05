// SHA-256 from OpenSSL's libcrypto (EVP, linked statically: native/README.md).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace mgerun {

// The sha256 of data as 64 lowercase hex digits. Reads in chunks; stops early (returning "") when `cancel` is
// set. Also gives the data's CRC-32 in *crc when crc is not null (the archive's own checksum, checked as zipfile
// checks it).
std::string sha256_hex(const uint8_t* data, std::size_t size, uint32_t* crc = nullptr,
                       const std::atomic<bool>* cancel = nullptr);

}  // namespace mgerun
