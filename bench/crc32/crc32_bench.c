/* CRC-32 of a file as a checkpoint load verifies it (4 MiB reads, a running
 * CRC), before and after core/src/data/crc32.c moved to zlib: "table" is
 * the slicing-by-8 code fsdpc had until session 11 (kept here only as the
 * baseline), "zlib" is crc32_z, what fsdpc calls now. Prints, per variant,
 * the best of R passes: thread CPU seconds in the CRC alone and GB/s, and
 * checks that both give the same value.
 *   cc -O2 -std=gnu11 bench/crc32/crc32_bench.c -o /tmp/crcb -lz -lpthread
 *   head -c 1G /dev/urandom > /tmp/1g.bin; /tmp/crcb /tmp/1g.bin 5
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

/* ---- the session-11 table code (baseline) ---- */
static uint32_t tables[8][256];
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
static uint32_t table_crc32(uint32_t crc, const uint8_t *p, size_t len) {
  crc = ~crc;
  while (len >= 8) {
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
static uint32_t zlib_crc32(uint32_t crc, const uint8_t *p, size_t len) {
  return (uint32_t)crc32_z(crc, p, len);
}

static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One pass over the file: reads 4 MiB at a time, CRC CPU seconds in *secs. */
static uint32_t pass(const char *path, uint32_t (*fn)(uint32_t, const uint8_t *, size_t),
                     uint8_t *buf, double *secs, uint64_t *bytes) {
  int fd = open(path, O_RDONLY);
  if (fd < 0) {
    perror(path);
    exit(1);
  }
  uint32_t c = 0;
  *secs = 0;
  *bytes = 0;
  for (ssize_t r; (r = read(fd, buf, 4 << 20)) > 0;) {
    double t0 = cpu_now();
    c = fn(c, buf, (size_t)r);
    *secs += cpu_now() - t0;
    *bytes += (uint64_t)r;
  }
  close(fd);
  return c;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: crc32_bench FILE [passes]\n");
    return 2;
  }
  int R = argc > 2 ? atoi(argv[2]) : 5;
  build_tables();
  uint8_t *buf = malloc(4 << 20);
  const char *name[2] = {"table (before)", "zlib crc32_z (after)"};
  uint32_t (*fn[2])(uint32_t, const uint8_t *, size_t) = {table_crc32, zlib_crc32};
  uint32_t crc[2];
  double best[2] = {1e30, 1e30};
  uint64_t bytes = 0;
  for (int r = 0; r < R; r++)
    for (int v = 0; v < 2; v++) { /* alternate, so load drifts hit both */
      double s;
      crc[v] = pass(argv[1], fn[v], buf, &s, &bytes);
      if (s < best[v])
        best[v] = s;
    }
  printf("file %s, %.3f GiB, best of %d passes (thread CPU time of the CRC)\n", argv[1],
         (double)bytes / (1 << 30), R);
  for (int v = 0; v < 2; v++)
    printf("%-22s crc %08x  %.3f s  %.2f GB/s\n", name[v], crc[v], best[v], bytes / best[v] / 1e9);
  printf("speed-up %.2fx; values %s\n", best[0] / best[1], crc[0] == crc[1] ? "equal" : "DIFFER");
  free(buf);
  return crc[0] == crc[1] ? 0 : 1;
}
