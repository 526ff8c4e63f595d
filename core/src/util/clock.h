/* Monotonic wall time for step timings and logs. */
#ifndef FSDPC_UTIL_CLOCK_H
#define FSDPC_UTIL_CLOCK_H

/* Seconds since an arbitrary start (CLOCK_MONOTONIC). */
double fsdpc__now(void);

#endif
