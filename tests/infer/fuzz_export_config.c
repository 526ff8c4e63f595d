/* Fuzz harness: config.json merged into any source text (ckpt/export.c).
 * Whatever the source, the export either refuses it with a message or
 * writes one JSON object that parses and keeps every source key. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/export.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  fsdpc_model_shape s = {.V = 96,
                         .C = 64,
                         .F = 160,
                         .L = 2,
                         .NH = 4,
                         .KVH = 2,
                         .HD = 16,
                         .max_pos = 64,
                         .eps = 1e-5f,
                         .rope.theta = 10000.0,
                         .tied = 0,
                         .bos_id = 1,
                         .eos_id = 2};
  fsdpc__model_shape_llama(&s);
  char *out = NULL;
  fsdpc_err err = {0};
  if (fsdpc__export_config_json(&s, FSDPC_DTYPE_BF16, text, &out, &err) == FSDPC_OK) {
    cJSON *o = cJSON_Parse(out), *src = cJSON_Parse(text);
    if (!cJSON_IsObject(o))
      abort(); /* the merge must give one JSON object */
    for (const cJSON *k = src ? src->child : NULL; k; k = k->next)
      if (!cJSON_GetObjectItemCaseSensitive(o, k->string))
        abort(); /* a source key lost */
    cJSON_Delete(o);
    cJSON_Delete(src);
  } else if (!err.msg[0]) {
    abort(); /* a refusal says why */
  }
  free(out);
  free(text);
  return 0;
}
