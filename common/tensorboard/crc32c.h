// CRC-32C (Castagnoli), the checksum TensorBoard's event files frame every record with. Debian
// 12 ships no C++ CRC-32C and its abseil predates absl/crc, so it is written here: the reflected
// polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF, one table.
#pragma once

#include <cstddef>
#include <cstdint>

namespace distlm::tensorboard {

uint32_t Crc32c(const void* data, size_t n);

// The TFRecord form: the CRC rotated right by 15 bits plus 0xa282ead8 (mod 2^32), so that a
// CRC of bytes that hold a CRC is not trivially related to it (LevelDB's mask).
uint32_t MaskedCrc32c(const void* data, size_t n);

}  // namespace distlm::tensorboard
