/* The OpenMP team size of the CPU ops (see ops_cpu.h, "Threads"). */
#include <omp.h>

#include "ops/cpu/ops_cpu.h"

static _Thread_local int team; /* 0: OpenMP's default */

int fsdpc__cpu_team_set(int threads) {
  int prev = team;
  team = threads > 0 ? threads : 0;
  return prev;
}

int fsdpc__cpu_nt(void) {
  return team > 0 ? team : omp_get_max_threads();
}
