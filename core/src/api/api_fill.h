/* How the public API hands a result struct to a caller built against any
 * version of the header: the library fills a complete copy, then copies as
 * much of it as the caller's struct holds (its struct_size, which the
 * caller set), so an older, shorter struct keeps working. */
#ifndef FSDPC_API_API_FILL_H
#define FSDPC_API_API_FILL_H

#include <string.h>

/* out: the caller's struct (struct_size set); full: the library's copy. */
#define FSDPC_API_FILL(out, full)                                                                  \
  do {                                                                                             \
    (full).struct_size =                                                                           \
        (out)->struct_size < sizeof(full) ? (out)->struct_size : (uint32_t)sizeof(full);           \
    memcpy((out), &(full), (full).struct_size);                                                    \
  } while (0)

/* A caller's struct that says how large it is. */
#define FSDPC_API_SIZED(p) ((p) != NULL && (p)->struct_size >= sizeof(uint32_t))

#endif
