/* Structural check of a sharded checkpoint's meta.json, before any tensor
 * is read (docs/checkpoints.md): exact types (integers are JSON numbers with
 * integral values, never strings), ranges (units' sizes agree with the
 * shard size, every tensor inside its unit),
 * and the tensors of each unit tiling it from offset 0 without a gap or an
 * overlap, which is how fsdpc lays units out. An edited offset, a tensor
 * moved to another unit or a step that is a string or absurd is refused in
 * one line instead of loading shifted weights. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meta_check.h"

#define MAX_EXACT 9007199254740992.0 /* 2^53 */

/* An exact non-negative integer up to hi, or -1 (sets *bad). */
static int64_t exact(const cJSON *v, double hi, int *bad) {
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) || v->valuedouble > hi ||
      v->valuedouble != floor(v->valuedouble)) {
    *bad = 1;
    return -1;
  }
  return (int64_t)v->valuedouble;
}

typedef struct span {
  uint64_t off, end;
  int tensor;
} span;

static int by_unit_offset(const void *a, const void *b) {
  const span *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off;
}

int fsdpc_sharded_check_meta(const cJSON *o, char *why, size_t cap) {
  int bad = 0;
  const cJSON *units = cJSON_GetObjectItemCaseSensitive(o, "units");
  const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(o, "tensors");
  int64_t S = exact(cJSON_GetObjectItemCaseSensitive(o, "shard_size"), 1 << 24, &bad);
  if (bad || S < 1) {
    snprintf(why, cap, "shard_size is not an integer in 1..16777216");
    return -1;
  }
  if (!cJSON_IsArray(units) || !cJSON_IsArray(tensors)) {
    snprintf(why, cap, "units and tensors must be arrays");
    return -1;
  }
  int nu = cJSON_GetArraySize(units), nt = cJSON_GetArraySize(tensors);
  uint64_t *flat = calloc((size_t)nu + 1, sizeof *flat);
  span *sp = calloc((size_t)nt + 1, sizeof *sp);
  int *unit_of = calloc((size_t)nt + 1, sizeof *unit_of);
  int rc = -1;
  if (!flat || !sp || !unit_of) {
    snprintf(why, cap, "out of memory");
    goto out;
  }
  int k = 0;
  const cJSON *u, *t;
  cJSON_ArrayForEach(u, units) {
    int64_t sn = exact(cJSON_GetObjectItemCaseSensitive(u, "shard_numel"), MAX_EXACT, &bad);
    int64_t fn = exact(cJSON_GetObjectItemCaseSensitive(u, "flat_numel"), MAX_EXACT, &bad);
    if (bad || sn < 1 || (uint64_t)fn != (uint64_t)sn * (uint64_t)S) {
      snprintf(why, cap,
               "unit %d: shard_numel and flat_numel must be integers with flat_numel = "
               "shard_numel x shard_size",
               k);
      goto out;
    }
    flat[k++] = (uint64_t)fn;
  }
  k = 0;
  cJSON_ArrayForEach(t, tensors) {
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(t, "name");
    const char *name = cJSON_IsString(nm) ? nm->valuestring : NULL;
    int64_t un = exact(cJSON_GetObjectItemCaseSensitive(t, "unit"), MAX_EXACT, &bad);
    int64_t off = exact(cJSON_GetObjectItemCaseSensitive(t, "unit_offset"), MAX_EXACT, &bad);
    int64_t numel = exact(cJSON_GetObjectItemCaseSensitive(t, "numel"), MAX_EXACT, &bad);
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape"), *d;
    int nd = 0;
    cJSON_ArrayForEach(d, shape) {
      exact(d, MAX_EXACT, &bad);
      nd++;
    }
    /* A shape that disagrees with the model is the plugin's own check
     * ("for another model"); here only the types and the ranges. */
    if (!name || bad || !cJSON_IsArray(shape) || nd < 1 || nd > 4) {
      snprintf(why, cap,
               "tensor %d (%.100s): name, unit, unit_offset, numel and shape must be a string and "
               "integers",
               k, name ? name : "?");
      goto out;
    }
    if (un >= nu || (uint64_t)off + (uint64_t)numel > flat[un]) {
      snprintf(why, cap, "tensor %.100s lies outside unit %lld", name, (long long)un);
      goto out;
    }
    sp[k] = (span){.off = (uint64_t)off, .end = (uint64_t)(off + numel), .tensor = k};
    unit_of[k] = (int)un;
    k++;
  }
  /* Per unit: its tensors, by offset, back to back from 0. */
  span *tmp = calloc((size_t)nt + 1, sizeof *tmp);
  if (!tmp) {
    snprintf(why, cap, "out of memory");
    goto out;
  }
  for (int ui = 0; ui < nu; ui++) {
    int m = 0;
    for (int i = 0; i < nt; i++)
      if (unit_of[i] == ui)
        tmp[m++] = sp[i];
    qsort(tmp, (size_t)m, sizeof *tmp, by_unit_offset);
    uint64_t at = 0;
    for (int i = 0; i < m; i++) {
      if (tmp[i].off != at) {
        const cJSON *x = cJSON_GetArrayItem(tensors, tmp[i].tensor);
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(x, "name");
        snprintf(why, cap,
                 "the tensors of unit %d do not tile it: tensor %.100s starts at %llu, expected "
                 "%llu (an offset was edited, or a tensor moved to another unit)",
                 ui, nm->valuestring, (unsigned long long)tmp[i].off, (unsigned long long)at);
        free(tmp);
        goto out;
      }
      at = tmp[i].end;
    }
    if (m == 0) {
      snprintf(why, cap, "unit %d holds no tensor", ui);
      free(tmp);
      goto out;
    }
  }
  free(tmp);
  /* The trainer state's step: an integer within the saved schedule. */
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "trainer_state");
  const cJSON *step = cJSON_GetObjectItemCaseSensitive(st, "step");
  if (step) {
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(st, "schedule");
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(sc, "max_steps");
    double hi = cJSON_IsNumber(ms) && ms->valuedouble >= 0 ? ms->valuedouble : MAX_EXACT;
    exact(step, hi, &bad);
    if (bad) {
      snprintf(why, cap, "trainer_state.step must be an integer in 0..%.0f (the saved max_steps)",
               hi);
      goto out;
    }
  }
  rc = 0;
out:
  free(flat);
  free(sp);
  free(unit_of);
  return rc;
}
