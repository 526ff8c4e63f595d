/* CRC-32 through zlib (see crc32.h). crc32_z takes a size_t length, so one
 * call covers any buffer (crc32's uInt length would stop at 4 GiB). */
#include "data/crc32.h"

#include <zlib.h>

uint32_t fsdpc__crc32(uint32_t crc, const void *data, size_t len) {
  if (len == 0) /* zlib answers 0 for a NULL buffer, whatever crc was */
    return crc;
  return (uint32_t)crc32_z(crc, data, len);
}
