/* Monotonic wall time for step timings and logs. */
#ifndef FSDPC_UTIL_CLOCK_H
#define FSDPC_UTIL_CLOCK_H

/* Seconds since an arbitrary start (CLOCK_MONOTONIC). */
double fsdpc__now(void);

/* Seconds since process pid (0: this one) started, from its start time in
 * /proc and CLOCK_BOOTTIME (10 ms resolution); -1 when unknown. */
double fsdpc__process_age(int pid);

#endif
