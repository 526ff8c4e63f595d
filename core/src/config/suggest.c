#include "config/suggest.h"

#include <string.h>

#define MAXLEN_ 128

int fsdpc__edit_distance(const char *a, const char *b) {
  size_t n = strlen(a), m = strlen(b);
  if (n >= MAXLEN_ || m >= MAXLEN_)
    return 1 << 20;
  /* Three rolling rows suffice for the transposition term. */
  int rows[3][MAXLEN_ + 1];
  int *prev2 = rows[0], *prev = rows[1], *cur = rows[2];
  for (size_t j = 0; j <= m; j++)
    prev[j] = (int)j;
  for (size_t i = 1; i <= n; i++) {
    cur[0] = (int)i;
    for (size_t j = 1; j <= m; j++) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      int best = prev[j] + 1;
      if (cur[j - 1] + 1 < best)
        best = cur[j - 1] + 1;
      if (prev[j - 1] + cost < best)
        best = prev[j - 1] + cost;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && prev2[j - 2] + 1 < best)
        best = prev2[j - 2] + 1;
      cur[j] = best;
    }
    int *t = prev2;
    prev2 = prev;
    prev = cur;
    cur = t;
  }
  return prev[m];
}

const char *fsdpc__did_you_mean(const char *word, const char *const *candidates, int n) {
  int limit = (int)strlen(word) / 3;
  if (limit < 2)
    limit = 2;
  const char *best = NULL;
  int best_d = limit + 1;
  for (int i = 0; i < n; i++) {
    int d = fsdpc__edit_distance(word, candidates[i]);
    if (d < best_d && d < (int)strlen(candidates[i])) {
      best_d = d;
      best = candidates[i];
    }
  }
  return best;
}
