/* nf4_tool IN.f32 OUTDIR BLOCK DOUBLE_QUANT: quantizes a raw little-endian
 * fp32 file with quant/nf4.c and writes what the numpy reference
 * (nf4_ref.py) checks, one raw file each: codes, absmax, qabsmax, absmax2,
 * offset, deq (the dequantized tensor, fp32) and map (the 8-bit dynamic map).
 * A refused input prints the library's one line and exits 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/nf4.h"

static int put(const char *dir, const char *name, const void *p, size_t bytes) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || (bytes && fwrite(p, 1, bytes, f) != bytes)) {
    fprintf(stderr, "nf4_tool: cannot write %s\n", path);
    if (f)
      fclose(f);
    return 1;
  }
  return fclose(f) != 0;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: nf4_tool IN.f32 OUTDIR BLOCK DOUBLE_QUANT\n");
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    fprintf(stderr, "nf4_tool: cannot read %s\n", argv[1]);
    return 2;
  }
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint64_t n = (uint64_t)bytes / 4;
  float *x = malloc(n ? n * 4 : 4);
  if (!x || fread(x, 4, n, f) != n) {
    fprintf(stderr, "nf4_tool: short read of %s\n", argv[1]);
    free(x);
    fclose(f);
    return 2;
  }
  fclose(f);
  fsdpc_nf4 q = {.n = n, .block_size = atoi(argv[3]), .double_quant = atoi(argv[4])};
  uint64_t nb = q.block_size > 0 ? fsdpc__nf4_blocks(n, q.block_size) : 0;
  uint64_t nb2 = q.block_size > 0 ? fsdpc__nf4_blocks2(n, q.block_size) : 0;
  q.codes = calloc((n + 1) / 2 + 1, 1);
  q.absmax = calloc(nb + 1, 4);
  q.qabsmax = calloc(nb + 1, 1);
  q.absmax2 = calloc(nb2 + 1, 4);
  float *deq = calloc(n + 1, 4), map[FSDPC_DYN_CODES];
  fsdpc__dynamic_map(map);
  fsdpc_err err = {0};
  int rc = 0;
  if (fsdpc__nf4_quantize(x, &q, "input", &err) != FSDPC_OK ||
      fsdpc__nf4_dequantize(&q, map, 0, n, deq, &err) != FSDPC_OK) {
    fprintf(stderr, "%s\n", err.msg); /* the refusal the reference expects */
    rc = 1;
  } else {
    const char *d = argv[2];
    int bad = put(d, "codes", q.codes, (n + 1) / 2) | put(d, "absmax", q.absmax, nb * 4) |
              put(d, "deq", deq, n * 4) | put(d, "offset", &q.offset, 4) |
              put(d, "map", map, sizeof map);
    if (q.double_quant)
      bad |= put(d, "qabsmax", q.qabsmax, nb) | put(d, "absmax2", q.absmax2, nb2 * 4);
    rc = bad ? 2 : 0;
  }
  free(x), free(q.codes), free(q.absmax), free(q.qabsmax), free(q.absmax2), free(deq);
  return rc;
}
