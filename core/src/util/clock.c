#include "util/clock.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double fsdpc__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double fsdpc__process_age(int pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, pid > 0 ? "/proc/%d/stat" : "/proc/self/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1.0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* fields after "(comm)", which may hold spaces: state is field 3,
   * starttime field 22 (clock ticks since boot) */
  const char *p = strrchr(buf, ')');
  if (!p)
    return -1.0;
  unsigned long long start = 0;
  int field = 2;
  for (p++; *p && field < 22; p++)
    if (*p == ' ')
      field++;
  if (field != 22 || sscanf(p, "%llu", &start) != 1)
    return -1.0;
  long hz = sysconf(_SC_CLK_TCK);
  struct timespec ts;
  if (hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts) != 0)
    return -1.0;
  double age = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec - (double)start / (double)hz;
  return age >= 0 ? age : 0.0;
}
