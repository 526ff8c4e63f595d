/* What the fsdpc CLI needs from a public fsdpc_trainer beyond the API: the
 * session under it (generation prompts). Not exported from libfsdpc.so. */
#ifndef FSDPC_API_API_INTERNAL_H
#define FSDPC_API_API_INTERNAL_H

#include "fsdpc/fsdpc.h"

struct fsdpc_session;
struct fsdpc_session *fsdpc__trainer_session(fsdpc_trainer *t);

#endif
