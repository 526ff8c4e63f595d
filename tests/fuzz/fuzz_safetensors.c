/* libFuzzer harness for the safetensors header parser and range reader.
 *
 * The input is a whole file image. Whatever it holds, fsdpc__st_open_mem
 * must either refuse it with a one-line message or return a handle whose
 * tensors all lie inside the image, can be found by name, and can be read
 * (float dtypes) without touching bytes outside their range: ASan checks
 * the last part, because the image is exactly `size` bytes long. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fsdpc_err err = {0};
  fsdpc_st_file *f = NULL;
  fsdpc_status s = fsdpc__st_open_mem("fuzz.safetensors", data, size, &f, &err);
  if (s != FSDPC_OK) {
    CHECK(f == NULL);
    CHECK(err.status == s);
    CHECK(strncmp(err.msg, "fuzz.safetensors: ", 18) == 0);
    CHECK(strchr(err.msg, '\n') == NULL);
    return 0;
  }
  float buf[64];
  uint32_t n = fsdpc__st_count(f);
  for (uint32_t i = 0; i < n; i++) {
    const fsdpc_st_info *t = fsdpc__st_at(f, i);
    CHECK(t->begin <= t->end && t->file_offset + (t->end - t->begin) <= size);
    CHECK(t->end - t->begin == t->numel * t->elem_size);
    CHECK(fsdpc__st_find(f, t->name) == t);
    int is_float =
        t->dtype == FSDPC_DTYPE_F32 || t->dtype == FSDPC_DTYPE_BF16 || t->dtype == FSDPC_DTYPE_F16;
    uint64_t k = t->numel < 64 ? t->numel : 64;
    s = fsdpc__st_read_f32(f, t->name, 0, k, buf, &err);
    CHECK((s == FSDPC_OK) == is_float);
    if (is_float) {
      /* The tail and one element past the end, which must be refused. */
      CHECK(fsdpc__st_read_f32(f, t->name, t->numel - k, k, buf, &err) == FSDPC_OK);
      CHECK(fsdpc__st_read_f32(f, t->name, t->numel - k, k + 1, buf, &err) != FSDPC_OK);
    }
  }
  for (uint32_t i = 0; i < fsdpc__st_meta_count(f); i++) {
    const char *key, *value;
    fsdpc__st_meta_at(f, i, &key, &value);
    CHECK(key && value && fsdpc__st_meta_get(f, key) != NULL);
  }
  CHECK(fsdpc__st_find(f, "") == NULL);
  fsdpc__st_close(f);
  return 0;
}
