/* libFuzzer harness for the config loader: YAML text, overrides and the
 * dump round trip (config/load.c, value.c, opts.c, dump.c).
 *
 * The input is YAML text, then optionally a NUL byte and overrides, one a
 * line. Whatever it is, the loader refuses it in one line or returns a
 * config whose dump loads back to an equal config. model.config (a file
 * name) is cleared by an override so the harness never reads files. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 16)
    return 0;
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  size_t ylen = strlen(text);
  const char *ovr[9];
  int n = 0;
  char *rest = ylen < size ? text + ylen + 1 : NULL;
  while (rest && *rest && n < 8) {
    ovr[n++] = rest;
    char *nl = strchr(rest, '\n');
    if (!nl)
      break;
    *nl = '\0';
    rest = nl + 1;
  }
  ovr[n++] = "model.config=";
  fsdpc_err err = {0};
  fsdpc_config *c = NULL;
  fsdpc_status s = fsdpc__config_from_string(text, "fuzz.yaml", ovr, n, &c, &err);
  if (s != FSDPC_OK) {
    CHECK(c == NULL);
    CHECK(err.msg[0] != '\0');
    CHECK(strchr(err.msg, '\n') == NULL);
    free(text);
    return 0;
  }
  char *dump = NULL;
  size_t dlen = 0;
  FILE *f = open_memstream(&dump, &dlen);
  CHECK(f != NULL);
  CHECK(fsdpc__config_dump(c, f) == FSDPC_OK);
  fclose(f);
  fsdpc_config *c2 = NULL;
  const char *ovr2[] = {"model.config="};
  s = fsdpc__config_from_string(dump, "dump.yaml", ovr2, 1, &c2, &err);
  if (s != FSDPC_OK) {
    fprintf(stderr, "dump does not load: %s\n%s\n", err.msg, dump);
    __builtin_trap();
  }
  const char *diff = NULL;
  if (!fsdpc__config_equal(c, c2, &diff)) {
    fprintf(stderr, "dump round trip differs at %s\n", diff);
    __builtin_trap();
  }
  fsdpc__config_destroy(c2);
  fsdpc__config_destroy(c);
  free(dump);
  free(text);
  return 0;
}
