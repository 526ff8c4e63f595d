/* CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, the one zlib, PNG and
 * gzip use) of token files and checkpoint files, computed by zlib's crc32_z
 * (zlib is linked for .jsonl.gz anyway, and its braided implementation is
 * 2.6-3x faster than the slicing-by-8 table this replaced, with the same
 * values: bench/results/2026-11-28-crc32-zlib.md). */
#ifndef FSDPC_DATA_CRC32_H
#define FSDPC_DATA_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* Continues a running CRC: start with crc = 0, feed chunks in order.
 * fsdpc__crc32(0, "123456789", 9) == 0xCBF43926. */
uint32_t fsdpc__crc32(uint32_t crc, const void *data, size_t len);

#endif
