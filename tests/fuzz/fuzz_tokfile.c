/* libFuzzer harness for the token-file reader (data/tokfile.c).
 *
 * The input is a file image. So that the fuzzer gets past the checksums,
 * both CRCs are recomputed over the image before it is written to a memfd
 * (the reader's own CRC check is exercised by the seeds that keep them
 * wrong: a flag in the last byte says whether to fix them). Whatever the
 * image, fsdpc__tokfile_open must refuse it in one line starting with the
 * path, or accept a file whose every token and document lies inside it. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "data/crc32.h"
#include "data/tokfile.h"

#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  int fix = data[size - 1] & 1;
  size--;
  uint8_t *img = malloc(size ? size : 1);
  if (!img)
    return 0;
  memcpy(img, data, size);
  if (fix && size >= FSDPC_TOKFILE_HEADER_BYTES) {
    uint32_t pc =
        fsdpc__crc32(0, img + FSDPC_TOKFILE_HEADER_BYTES, size - FSDPC_TOKFILE_HEADER_BYTES);
    for (int i = 0; i < 4; i++)
      img[48 + i] = (uint8_t)(pc >> (8 * i));
    uint32_t hc = fsdpc__tokfile_header_crc(img);
    for (int i = 0; i < 4; i++)
      img[28 + i] = (uint8_t)(hc >> (8 * i));
  }
  int fd = memfd_create("fuzz.tok", MFD_CLOEXEC);
  if (fd < 0 || (size && write(fd, img, size) != (ssize_t)size)) {
    if (fd >= 0)
      close(fd);
    free(img);
    return 0;
  }
  free(img);
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  fsdpc_err err = {0};
  fsdpc_tokfile *tf = NULL;
  fsdpc_status s = fsdpc__tokfile_open(path, &tf, &err);
  if (s != FSDPC_OK) {
    CHECK(tf == NULL);
    CHECK(strncmp(err.msg, path, strlen(path)) == 0);
    CHECK(strchr(err.msg, '\n') == NULL);
  } else {
    int64_t n = fsdpc__tokfile_n_tokens(tf), d = fsdpc__tokfile_n_docs(tf);
    CHECK(n >= 0 && d >= 0);
    for (int64_t i = 0; i < n; i++) {
      CHECK((uint32_t)fsdpc__tokfile_token(tf, i) < tf->hdr.vocab_size);
      (void)fsdpc__tokfile_mask(tf, i);
    }
    for (int64_t i = 0; i < d; i++)
      CHECK(tf->offsets[i] <= tf->offsets[i + 1] && tf->offsets[i + 1] <= (uint64_t)n);
    int32_t buf[64];
    int64_t k = n < 64 ? n : 64;
    fsdpc__tokfile_read(tf, n - k, k, buf);
    fsdpc__tokfile_close(tf);
  }
  close(fd);
  return 0;
}
