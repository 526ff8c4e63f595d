/* fsdpc-temporary-opts-shim: TEMPORARY, branch `plugin` only. The real
 * opts.c comes from the config helper's branch; drop this file at merge.
 * It exists so that libfsdpc (which calls fsdpc__opts_get from the plugin
 * host services) links in this worktree. */
#include "../../../tests/plugin/opts_testimpl.c"
