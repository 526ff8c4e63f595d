/* A base model's identity by content (issue 43.6): what a LoRA checkpoint
 * records of the weights its adapters were trained on, and checks on
 * resume. The path is informative only: the same weights under another
 * spelling of the path (a link, ./x, an absolute path) are the same base,
 * and weights changed in place under the same path are another one. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "data/crc32.h"
#include "io/hf_ckpt.h"
#include "io/safetensors.h"
#include "util/log.h"

#define READ_BYTES (8u << 20)

/* CRC-32 of one tensor's bytes as stored, read in 8 MiB pieces. */
static fsdpc_status tensor_crc(fsdpc_hf_ckpt *ck, const fsdpc_st_info *t, unsigned char *buf,
                               uint32_t *crc, fsdpc_err *err) {
  uint64_t per = READ_BYTES / t->elem_size;
  uint32_t c = 0;
  for (uint64_t at = 0; at < t->numel; at += per) {
    uint64_t n = t->numel - at < per ? t->numel - at : per;
    FSDPC_TRY(fsdpc__hf_ckpt_read_raw(ck, t->name, at, n, buf, err));
    c = fsdpc__crc32(c, buf, (size_t)(n * t->elem_size));
  }
  *crc = c;
  return FSDPC_OK;
}

fsdpc_status fsdpc__base_id(const char *dir, fsdpc_base_id *out, fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  fsdpc_hf_ckpt *ck = NULL;
  FSDPC_TRY(fsdpc__hf_ckpt_open(dir, &ck, err));
  uint32_t n = fsdpc__hf_ckpt_count(ck);
  const fsdpc_st_info **info = calloc(n + 1, sizeof *info);
  uint32_t *crcs = calloc(n + 1, sizeof *crcs);
  fsdpc_status st = info && crcs ? FSDPC_OK : fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  /* every tensor looked up first: this opens every file, after which reads
   * are safe from many threads (io/hf_ckpt.h) */
  for (uint32_t i = 0; i < n && st == FSDPC_OK; i++)
    st = fsdpc__hf_ckpt_find(ck, fsdpc__hf_ckpt_name(ck, i), &info[i], err);
  int failed = st != FSDPC_OK;
  fsdpc_err first = {0};
#pragma omp parallel if (!failed)
  {
    unsigned char *buf = malloc(READ_BYTES);
#pragma omp for schedule(dynamic, 1)
    for (uint32_t i = 0; i < n; i++) {
      int stop;
#pragma omp atomic read
      stop = failed;
      fsdpc_err le = {0};
      fsdpc_status s = stop  ? FSDPC_OK
                       : buf ? tensor_crc(ck, info[i], buf, &crcs[i], &le)
                             : fsdpc__fail(&le, FSDPC_SYSTEM_ERROR, "out of memory");
      if (s != FSDPC_OK) {
#pragma omp critical
        if (!failed) {
          first = le;
#pragma omp atomic write
          failed = 1;
        }
      }
    }
    free(buf);
  }
  if (st == FSDPC_OK && failed) {
    *err = first;
    st = FSDPC_SYSTEM_ERROR;
  }
  /* In name order: name, dtype, shape and the bytes' CRC of each tensor. */
  uint32_t c = 0;
  for (uint32_t i = 0; i < n && st == FSDPC_OK; i++) {
    const fsdpc_st_info *t = info[i];
    unsigned char le[8];
    c = fsdpc__crc32(c, t->name, strlen(t->name) + 1);
    c = fsdpc__crc32(c, t->dtype_name, strlen(t->dtype_name) + 1);
    for (int d = 0; d < t->ndim; d++) {
      for (int b = 0; b < 8; b++)
        le[b] = (unsigned char)((uint64_t)t->shape[d] >> (8 * b));
      c = fsdpc__crc32(c, le, 8);
    }
    for (int b = 0; b < 4; b++)
      le[b] = (unsigned char)(crcs[i] >> (8 * b));
    c = fsdpc__crc32(c, le, 4);
    out->bytes += t->numel * t->elem_size;
  }
  out->crc = c;
  out->tensors = n;
  free(info);
  free(crcs);
  fsdpc__hf_ckpt_close(ck);
  return st;
}

fsdpc_status fsdpc__lora_state_add_base(const char *path, const fsdpc_base_id *id, char **json,
                                        fsdpc_err *err) {
  cJSON *o = cJSON_Parse(*json), *b = cJSON_CreateObject();
  char crc[16];
  snprintf(crc, sizeof crc, "%08" PRIx32, id->crc);
  char *txt = NULL;
  if (o && b && cJSON_AddStringToObject(b, "path", path[0] ? path : "random init") &&
      cJSON_AddStringToObject(b, "tensors_crc32", crc) &&
      cJSON_AddNumberToObject(b, "tensors", id->tensors) &&
      cJSON_AddNumberToObject(b, "bytes", (double)id->bytes) &&
      cJSON_AddItemToObject(o, "lora_base", b)) {
    b = NULL;
    txt = cJSON_PrintUnformatted(o);
  }
  cJSON_Delete(b);
  cJSON_Delete(o);
  if (!txt)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory for the trainer state");
  free(*json);
  *json = txt;
  return FSDPC_OK;
}

fsdpc_status fsdpc__lora_check_base(const char *state_json, const char *path,
                                    const fsdpc_base_id *id, const char *dir, int rank,
                                    fsdpc_err *err) {
  cJSON *o = cJSON_Parse(state_json);
  const cJSON *b = cJSON_GetObjectItemCaseSensitive(o, "lora_base");
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(b, "tensors_crc32");
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(b, "path");
  const cJSON *nt = cJSON_GetObjectItemCaseSensitive(b, "tensors");
  char mine[16];
  snprintf(mine, sizeof mine, "%08" PRIx32, id->crc);
  fsdpc_status st = FSDPC_OK;
  if (!b)
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s holds no LoRA adapters (no lora_base in its state): resume a LoRA run "
                     "from a checkpoint of a LoRA run, or set peft.method: none",
                     dir);
  else if (cJSON_IsString(b)) { /* written before identities by content */
    if (rank == 0)
      FSDPC_LOGW("%s records its base as '%s' (before fsdpc recorded bases by content); the base "
                 "is not checked on this resume, the next save records it by content",
                 dir, b->valuestring);
  } else if (!cJSON_IsString(c) || strcmp(c->valuestring, mine) != 0 || !cJSON_IsNumber(nt) ||
             (uint32_t)nt->valuedouble != id->tensors)
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "%s: its adapters were trained on other weights (%s: tensors crc32 %s) than "
                     "model.init.from %s holds now (tensors crc32 %s, %" PRIu32
                     " tensors); point model.init.from at the base it was trained on, unchanged",
                     dir, cJSON_IsString(p) ? p->valuestring : "?",
                     cJSON_IsString(c) ? c->valuestring : "?", path[0] ? path : "(random init)",
                     mine, id->tensors);
  cJSON_Delete(o);
  return st;
}
