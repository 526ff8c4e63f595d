/* Byte-wise table CRC-32C. Records are a few hundred bytes per logged step,
 * so a plain 256-entry table is fast enough; no hardware instruction. */
#include "obs/crc32c.h"

#include <pthread.h>

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = (c & 1) ? 0x82F63B78u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
}

uint32_t fsdpc__crc32c(uint32_t crc, const void *data, size_t len) {
  pthread_once(&table_once, build_table);
  const uint8_t *p = data;
  crc = ~crc;
  for (size_t i = 0; i < len; i++)
    crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t fsdpc__crc32c_masked(const void *data, size_t len) {
  uint32_t c = fsdpc__crc32c(0, data, len);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}
