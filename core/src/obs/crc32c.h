/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of
 * TensorBoard's record format (and of iSCSI, ext4, leveldb). Debian 12 has
 * no C library for it (libcrc32c-dev is not packaged for bookworm; zlib has
 * only the IEEE CRC-32), so it is a table here. */
#ifndef FSDPC_OBS_CRC32C_H
#define FSDPC_OBS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues a running CRC: start with crc = 0, feed chunks in order.
 * fsdpc__crc32c(0, "123456789", 9) == 0xE3069283. */
uint32_t fsdpc__crc32c(uint32_t crc, const void *data, size_t len);

/* TensorBoard's (leveldb's) masked CRC: rotate right by 15, add a constant,
 * so that a CRC stored inside CRC'd data does not checksum to itself. */
uint32_t fsdpc__crc32c_masked(const void *data, size_t len);

#endif
