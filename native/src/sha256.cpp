#include "sha256.h"

#include <openssl/evp.h>
#include <sys/mman.h>

#include <future>
#include <memory>
#include <stdexcept>

#include "zip.h"

namespace mgerun {

namespace {

constexpr std::size_t kChunk = 4 << 20;
constexpr std::size_t kParallelCrc = 8 << 20;  // from this size the CRC runs on a second thread beside the hash

uint32_t crc_of(const uint8_t* data, std::size_t size, const std::atomic<bool>* cancel) {
  uint32_t crc = 0;
  for (std::size_t at = 0; at < size; at += kChunk) {
    if (cancel && cancel->load()) break;
    std::size_t n = size - at < kChunk ? size - at : kChunk;
    crc = crc32_update(crc, data + at, n);
  }
  return crc;
}

}  // namespace

std::string sha256_hex(const uint8_t* data, std::size_t size, uint32_t* crc, const std::atomic<bool>* cancel) {
  std::future<uint32_t> crc_later;
  if (crc && size >= kParallelCrc) {
    ::madvise(const_cast<uint8_t*>(data - (reinterpret_cast<uintptr_t>(data) & 4095)),
              size + (reinterpret_cast<uintptr_t>(data) & 4095), MADV_SEQUENTIAL);
    crc_later = std::async(std::launch::async, crc_of, data, size, cancel);
  } else if (crc) {
    *crc = crc32_update(0, data, size);
  }
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1) throw std::runtime_error("sha256: no context");
  bool stopped = false;
  for (std::size_t at = 0; at < size; at += kChunk) {
    if (cancel && cancel->load()) {
      stopped = true;
      break;
    }
    std::size_t n = size - at < kChunk ? size - at : kChunk;
    EVP_DigestUpdate(ctx.get(), data + at, n);
  }
  unsigned char md[32];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), md, &len);
  if (crc_later.valid()) *crc = crc_later.get();
  if (stopped) return "";
  static const char* hex = "0123456789abcdef";
  std::string out(64, '0');
  for (int i = 0; i < 32; ++i) {
    out[2 * i] = hex[md[i] >> 4];
    out[2 * i + 1] = hex[md[i] & 15];
  }
  return out;
}

}  // namespace mgerun
