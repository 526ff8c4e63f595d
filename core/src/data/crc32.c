/* Slicing-by-8 CRC-32: eight 256-entry tables let the loop consume eight
 * bytes per step, which keeps checksum-on-open cheap for large token files
 * (a plain byte-wise table is about 4x slower). */
#include "data/crc32.h"

#include <pthread.h>
#include <string.h>

static uint32_t tables[8][256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    tables[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++)
      tables[t][i] = (tables[t - 1][i] >> 8) ^ tables[0][tables[t - 1][i] & 0xFF];
}

uint32_t fsdpc__crc32(uint32_t crc, const void *data, size_t len) {
  pthread_once(&tables_once, build_tables);
  const uint8_t *p = data;
  crc = ~crc;
  while (len >= 8) {
    /* Byte-wise loads keep this independent of host endianness/alignment. */
    uint32_t lo =
        crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
    uint32_t hi =
        (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
    crc = tables[7][lo & 0xFF] ^ tables[6][(lo >> 8) & 0xFF] ^ tables[5][(lo >> 16) & 0xFF] ^
          tables[4][lo >> 24] ^ tables[3][hi & 0xFF] ^ tables[2][(hi >> 8) & 0xFF] ^
          tables[1][(hi >> 16) & 0xFF] ^ tables[0][hi >> 24];
    p += 8;
    len -= 8;
  }
  while (len--)
    crc = tables[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
  return ~crc;
}
