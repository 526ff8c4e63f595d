/* CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, the one zlib and PNG
 * use), so a token file's checksum can be verified with any standard tool.
 * Written here to avoid a zlib dependency for one function. */
#ifndef FSDPC_DATA_CRC32_H
#define FSDPC_DATA_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* Continues a running CRC: start with crc = 0, feed chunks in order.
 * fsdpc__crc32(0, "123456789", 9) == 0xCBF43926. */
uint32_t fsdpc__crc32(uint32_t crc, const void *data, size_t len);

#endif
