/* Replays a fuzz corpus through the harness without libFuzzer, so ctest
 * runs every seed (and every crash reproducer kept in the corpus) with any
 * compiler. Usage: fuzz_safetensors_replay DIR_OR_FILE... */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    fprintf(stderr, "%s: cannot open\n", path);
    return 1;
  }
  fseek(fp, 0, SEEK_END);
  long len = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  /* An exact-size heap copy, so an over-read is caught under ASan builds. */
  uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
  size_t got = buf ? fread(buf, 1, (size_t)len, fp) : 0;
  fclose(fp);
  if (!buf || got != (size_t)len) {
    fprintf(stderr, "%s: cannot read\n", path);
    free(buf);
    return 1;
  }
  LLVMFuzzerTestOneInput(buf, got);
  free(buf);
  return 0;
}

int main(int argc, char **argv) {
  int files = 0, bad = 0;
  for (int a = 1; a < argc; a++) {
    struct stat st;
    if (stat(argv[a], &st) != 0) {
      fprintf(stderr, "%s: not found\n", argv[a]);
      return 1;
    }
    if (!S_ISDIR(st.st_mode)) {
      bad += replay_file(argv[a]);
      files++;
      continue;
    }
    struct dirent **list;
    int n = scandir(argv[a], &list, NULL, alphasort);
    if (n < 0)
      return 1;
    for (int i = 0; i < n; i++) {
      if (list[i]->d_name[0] != '.') {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[a], list[i]->d_name);
        bad += replay_file(path);
        files++;
      }
      free(list[i]);
    }
    free(list);
  }
  printf("replayed %d inputs\n", files);
  return bad != 0 || files == 0;
}
