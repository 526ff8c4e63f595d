/* Driving a statedict plugin: staged, checksummed, all-or-nothing saves;
 * verified loads; the engine as a backend; choosing the plugins. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt_internal.h"
#include "ckpt/diverge.h"
#include "ckpt/verify.h"
#include "config/opts.h"
#include "io/fileio.h"
#include "plugin/call.h"
#include "util/fs.h"
#include "util/log.h"

/* After a plugin call failed: the host callback's message when one failed
 * (it names the file or tensor), else the plugin's. */
static fsdpc_status plugin_error(fsdpc_ckpt_host *h, const fsdpc_component *c, fsdpc_status r,
                                 fsdpc_err *err) {
  if (h->has_err) {
    fsdpc_err scratch; /* consume the plugin's pending message */
    fsdpc__plugin_fail(c, r, &scratch);
    *err = h->err;
    return r;
  }
  return fsdpc__plugin_fail(c, r, err);
}

/* Every rank learns whether every rank succeeded; a rank that did not
 * keeps its own message, the others say who to look at. */
static fsdpc_status agree(fsdpc_ckpt_host *h, fsdpc_status st, const char *what, const char *dir,
                          fsdpc_err *err) {
  int ok = st == FSDPC_OK;
  fsdpc_err e2;
  fsdpc__err_clear(&e2);
  fsdpc_status a = h->be.agree(h->be.ctx, &ok, &e2);
  if (st != FSDPC_OK)
    return st;
  if (a != FSDPC_OK) {
    *err = e2;
    return a;
  }
  if (!ok)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s %s failed on another rank (see its message)",
                       what, dir);
  return FSDPC_OK;
}

fsdpc_status fsdpc__ckpt_stage_begin(const char *root, const char *name, fsdpc_err *err) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s/.tmp-%s", root, name);
  FSDPC_TRY(fsdpc__mkdir_p(root, err));
  FSDPC_TRY(fsdpc__ckpt_rm_rf(tmp, err)); /* a save that died earlier */
  if (mkdir(tmp, 0755) != 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot create %s: %s", tmp, strerror(errno));
  return FSDPC_OK;
}

/* dir/name = text through the host's checksummed writer; text NULL: none. */
static fsdpc_status write_text(fsdpc_ckpt_host *h, const char *dir, const char *name,
                               const char *text, fsdpc_err *err) {
  if (!text)
    return FSDPC_OK;
  char *p = fsdpc__path_join(dir, name);
  if (!p)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  int32_t r = h->sd.write_file(h, p, text, strlen(text));
  free(p);
  if (r != FSDPC_OK)
    *err = h->err;
  return r;
}

fsdpc_status fsdpc__ckpt_save_part(fsdpc_ckpt_host *h, const fsdpc_component *plugin,
                                   const fsdpc_opts *opts, const char *tmp,
                                   const fsdpc_sd_save_opts *so, fsdpc_err *err) {
  free(h->dir);
  if (!(h->dir = strdup(tmp)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  fsdpc__ckpt_files_clear(&h->written, &h->n_written);
  h->cap_written = 0;
  h->has_err = 0;
  h->save_dtype = so->dtype;
  int32_t r = fsdpc__call_sd_save(plugin, opts, &h->sd, tmp, so);
  fsdpc_err e2;
  if (h->be.done) h->be.done(h->be.ctx, 0, &e2); /* staged shards are not needed any more */
  if (r != FSDPC_OK)
    return plugin_error(h, plugin, r, err);
  if (h->sd.rank == 0) { /* the config, and the divergence rule's marker (ckpt/diverge.h) */
    FSDPC_TRY(write_text(h, tmp, FSDPC_CKPT_CONFIG_FILE, h->config_yaml, err));
    FSDPC_TRY(write_text(h, tmp, FSDPC_CKPT_LOSS_FILE, h->loss_marker, err));
  }
  if (h->n_written > 0)
    FSDPC_TRY(fsdpc__ckpt_manifest_write(tmp, h->sd.rank, h->written, h->n_written, err));
  return FSDPC_OK;
}

void fsdpc__ckpt_host_set_loss_marker(fsdpc_ckpt_host *h, char *json) {
  free(h->loss_marker);
  h->loss_marker = json;
}

fsdpc_status fsdpc__ckpt_stage_commit(const char *root, const char *name, int64_t keep,
                                      fsdpc_err *err) {
  char tmp[4096], final[4096], old[4096];
  snprintf(tmp, sizeof tmp, "%s/.tmp-%s", root, name);
  snprintf(final, sizeof final, "%s/%s", root, name);
  snprintf(old, sizeof old, "%s/.old-%s", root, name);
  fsdpc__ckpt_fsync_dir(tmp);
  /* Replace an older folder of the same name (a re-run's "final"): move it
   * aside first so that one complete copy exists at every moment. */
  struct stat sb;
  int had = stat(final, &sb) == 0;
  if (had) {
    FSDPC_TRY(fsdpc__ckpt_rm_rf(old, err));
    if (rename(final, old) != 0)
      return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot move %s aside: %s", final,
                         strerror(errno));
  }
  if (rename(tmp, final) != 0)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "cannot rename %s to %s: %s", tmp, final,
                       strerror(errno));
  fsdpc__ckpt_fsync_dir(root);
  if (had)
    FSDPC_TRY(fsdpc__ckpt_rm_rf(old, err));
  if (strncmp(name, FSDPC_CKPT_STEP_PREFIX, strlen(FSDPC_CKPT_STEP_PREFIX)) == 0)
    FSDPC_TRY(fsdpc__ckpt_rotate(root, keep, err));
  return FSDPC_OK;
}

fsdpc_status fsdpc__ckpt_save(fsdpc_ckpt_host *h, const fsdpc_component *plugin,
                              const fsdpc_opts *opts, const char *root, const char *name,
                              const fsdpc_sd_save_opts *so, int64_t keep, fsdpc_err *err) {
  int rank = h->sd.rank;
  char tmp[4096], final[4096];
  snprintf(tmp, sizeof tmp, "%s/.tmp-%s", root, name);
  snprintf(final, sizeof final, "%s/%s", root, name);
  fsdpc_status st = rank == 0 ? fsdpc__ckpt_stage_begin(root, name, err) : FSDPC_OK;
  FSDPC_TRY(agree(h, st, "creating", tmp, err));
  st = fsdpc__ckpt_save_part(h, plugin, opts, tmp, so, err);
  st = agree(h, st, "saving", final, err);
  if (st != FSDPC_OK) {
    if (rank == 0) {
      fsdpc_err e2;
      fsdpc__ckpt_rm_rf(tmp, &e2);
    }
    return st;
  }
  if (rank == 0)
    st = fsdpc__ckpt_stage_commit(root, name, keep, err);
  return agree(h, st, "finishing", final, err);
}

fsdpc_status fsdpc__ckpt_load(fsdpc_ckpt_host *h, const fsdpc_component *plugin,
                              const fsdpc_opts *opts, const char *dir, int with_optimizer,
                              fsdpc_err *err) {
  free(h->dir);
  if (!(h->dir = strdup(dir)))
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  fsdpc__ckpt_cache_clear(h);
  fsdpc__ckpt_files_clear(&h->manifest, &h->n_manifest);
  free(h->loaded_state);
  h->loaded_state = NULL;
  h->has_err = 0;
  fsdpc_status st = fsdpc__ckpt_manifest_read(dir, &h->manifest, &h->n_manifest, err);
  h->verify = h->n_manifest > 0;
  if (st == FSDPC_OK && !h->verify) {
    /* config.yaml marks a folder fsdpc wrote: it must have its checksums. */
    char *p = fsdpc__path_join(dir, FSDPC_CKPT_CONFIG_FILE);
    struct stat sb;
    if (p && stat(p, &sb) == 0)
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "checkpoint %s: its checksums.rank-*.txt files are missing; the "
                       "checkpoint is incomplete, resume from an older one",
                       dir);
    free(p);
  }
  if (st == FSDPC_OK && !h->verify && h->sd.rank == 0)
    FSDPC_LOGW("%s has no checksums (not written by fsdpc?): its files are not verified", dir);
  if (st == FSDPC_OK) {
    int32_t r = fsdpc__call_sd_load(plugin, opts, &h->sd, dir, with_optimizer);
    if (r != FSDPC_OK)
      st = plugin_error(h, plugin, r, err);
    /* before the staged shards move on: NaN/Inf is refused by name */
    if (st == FSDPC_OK && !h->allow_nonfinite)
      st = fsdpc__ckpt_check_finite(h, with_optimizer, dir, err);
    /* staged shards go to the device only after a complete load */
    if (h->be.done) {
      fsdpc_err e2;
      fsdpc_status d = h->be.done(h->be.ctx, st == FSDPC_OK, &e2);
      if (st == FSDPC_OK && d != FSDPC_OK) st = fsdpc__fail(err, d, "%s", e2.msg);
    }
  }
  fsdpc__ckpt_cache_clear(h);
  return agree(h, st, "loading", dir, err);
}

/* ---- the engine as a backend ---- */

/* A view of the engine's units: all of them, only the trainable ones (LoRA's
 * adapters: checkpoints hold them and their optimizer state, not the frozen
 * base), or the frozen base with each adapter merged in (LoRA's merged
 * export). Unit u of the view is engine unit u0 + u. */
typedef struct engine_view {
  fsdpc_engine *e;
  int u0;
  int merged;
  const fsdpc_lora *lora;
  const fsdpc_model_shape *shape;
} engine_view;

static float *eng_shard(void *ctx, int u, int slot) {
  engine_view *v = ctx;
  /* an NF4 unit's shard is bytes (fsdp/nf4_unit.h), finite by construction
   * (quant/nf4.c refuses the rest): the full format gathers it dequantized */
  if (fsdpc__engine_unit(v->e, v->u0 + u)->nf4)
    return NULL;
  fsdpc_err err;
  float *p = fsdpc__engine_host_shard(v->e, v->u0 + u, slot, &err);
  if (!p) FSDPC_LOGE("%s", err.msg);
  return p;
}

static fsdpc_status eng_done(void *ctx, int loaded, fsdpc_err *err) {
  return fsdpc__engine_host_shards_done(((engine_view *)ctx)->e, loaded, err);
}

static fsdpc_status eng_gather(void *ctx, int u, int slot, int root, float *full, fsdpc_err *err) {
  engine_view *v = ctx;
  FSDPC_TRY(fsdpc__engine_gather_unit(v->e, v->u0 + u, slot, root, full, err));
  if (!v->merged)
    return FSDPC_OK;
  return fsdpc__lora_merge_unit(v->e, v->shape, v->lora, v->u0 + u, root, full, err);
}

static fsdpc_status eng_agree(void *ctx, int *ok, fsdpc_err *err) {
  double bad = *ok ? 0.0 : 1.0;
  FSDPC_TRY(fsdpc__dist_all_reduce_f64(fsdpc__engine_dist(((engine_view *)ctx)->e),
                                       FSDPC_GROUP_WORLD, &bad, 1, "checkpoint agree", err));
  *ok = bad == 0.0;
  return FSDPC_OK;
}

typedef struct engine_keep {
  int *param_unit;
  uint64_t *param_offset;
  const char **slot_names;
  fsdpc_param_info *params;
  engine_view view;
} engine_keep;

void fsdpc__ckpt_engine_opts_free(void *keep) {
  engine_keep *k = keep;
  if (!k)
    return;
  free(k->param_unit);
  free(k->param_offset);
  free(k->slot_names);
  free(k->params);
  free(k);
}

fsdpc_status fsdpc__ckpt_engine_opts(fsdpc_engine *e, const fsdpc_model_shape *shape,
                                     fsdpc_ckpt_host_opts *o, void **keep, fsdpc_err *err) {
  return fsdpc__ckpt_engine_opts_view(e, shape, NULL, FSDPC_CKPT_VIEW_ALL, o, keep, err);
}

fsdpc_status fsdpc__ckpt_engine_opts_view(fsdpc_engine *e, const fsdpc_model_shape *shape,
                                          const fsdpc_lora *lora, int view, fsdpc_ckpt_host_opts *o,
                                          void **keep, fsdpc_err *err) {
  int np = fsdpc__engine_n_params(e), nu = fsdpc__engine_n_units(e);
  uint32_t ns = fsdpc__engine_n_slots(e);
  /* the view's units are one run of the engine's: the base's units come
   * first, the adapters' after them (runplan.h) */
  int u0 = 0, u1 = nu;
  if (view != FSDPC_CKPT_VIEW_ALL) {
    int first_trainable = nu;
    for (int u = 0; u < nu; u++)
      if (!fsdpc__engine_unit(e, u)->frozen) {
        first_trainable = u;
        break;
      }
    if (view == FSDPC_CKPT_VIEW_TRAINABLE)
      u0 = first_trainable;
    else
      u1 = first_trainable;
  }
  engine_keep *k = calloc(1, sizeof *k);
  if (k) {
    k->param_unit = calloc((size_t)np + 1, sizeof(int));
    k->param_offset = calloc((size_t)np + 1, sizeof(uint64_t));
    k->slot_names = calloc((size_t)ns + 1, sizeof(char *));
    k->params = calloc((size_t)np + 1, sizeof(fsdpc_param_info));
  }
  if (!k || !k->param_unit || !k->param_offset || !k->slot_names || !k->params) {
    fsdpc__ckpt_engine_opts_free(k);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  int n = 0;
  for (int p = 0; p < np; p++) {
    uint64_t off;
    int unit;
    const fsdpc_param_info *pi = fsdpc__engine_param(e, p, &off, &unit);
    if (unit < u0 || unit >= u1)
      continue;
    k->params[n] = *pi;
    k->param_offset[n] = off;
    k->param_unit[n] = unit - u0;
    n++;
  }
  for (uint32_t i = 0; i < ns; i++)
    k->slot_names[i] = fsdpc__engine_slot_name(e, i);
  k->view = (engine_view){
      .e = e, .u0 = u0, .merged = view == FSDPC_CKPT_VIEW_MERGED, .lora = lora, .shape = shape};
  fsdpc_dist *d = fsdpc__engine_dist(e);
  *o = (fsdpc_ckpt_host_opts){.shape = shape,
                              .params = k->params,
                              .n_params = n,
                              .param_unit = k->param_unit,
                              .param_offset = k->param_offset,
                              .units = fsdpc__engine_unit(e, u0 < nu ? u0 : 0),
                              .n_units = u1 - u0,
                              .rank = d->rank,
                              .world_size = d->world_size,
                              .shard_rank = d->shard_rank,
                              .shard_size = d->shard_size,
                              .replica_rank = d->replica_rank,
                              .replica_size = d->replica_size,
                              .n_slots = view == FSDPC_CKPT_VIEW_MERGED ? 0 : ns,
                              .slot_names = k->slot_names,
                              .backend = {.ctx = &k->view,
                                          .shard = eng_shard,
                                          .gather = eng_gather,
                                          .agree = eng_agree,
                                          .done = eng_done}};
  *keep = k;
  return FSDPC_OK;
}

/* ---- plugin selection ---- */

void fsdpc__ckpt_formats_free(fsdpc_ckpt_formats *f) {
  fsdpc__opts_destroy(f->opts);
  memset(f, 0, sizeof *f);
}

fsdpc_status fsdpc__ckpt_formats_select(fsdpc_registry *reg, const char *intermediate,
                                        const char *final, const fsdpc_opts *user_opts,
                                        fsdpc_ckpt_formats *out, fsdpc_err *err) {
  memset(out, 0, sizeof *out);
  fsdpc_status st = fsdpc__registry_select(reg, FSDPC_KIND_STATEDICT, intermediate, NULL,
                                           &out->intermediate, err);
  if (st != FSDPC_OK)
    return fsdpc__err_prefix(err, "checkpoint.intermediate_format");
  st = fsdpc__registry_select(reg, FSDPC_KIND_STATEDICT, final, NULL, &out->final, err);
  if (st != FSDPC_OK)
    return fsdpc__err_prefix(err, "checkpoint.final_format");
  /* One options map serves both plugins: validate it against the union of
   * their keys (a key both declare is taken from the first). */
  const fsdpc_component_desc *a = out->intermediate->desc, *b = out->final->desc;
  uint32_t n = a->n_options + (a == b ? 0 : b->n_options);
  const fsdpc_option_desc **descs = calloc((size_t)n + 1, sizeof *descs);
  if (!descs)
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  uint32_t k = 0;
  for (uint32_t i = 0; i < a->n_options; i++)
    descs[k++] = a->options[i];
  for (uint32_t i = 0; a != b && i < b->n_options; i++) {
    int dup = 0;
    for (uint32_t j = 0; j < a->n_options; j++)
      dup |= strcmp(a->options[j]->key, b->options[i]->key) == 0;
    if (!dup)
      descs[k++] = b->options[i];
  }
  char who[160];
  snprintf(who, sizeof who, "statedict '%s'%s%s%s", a->name, a == b ? "" : " and '",
           a == b ? "" : b->name, a == b ? "" : "'");
  st = fsdpc__opts_clone(user_opts, &out->opts, err);
  if (st == FSDPC_OK)
    st = fsdpc__opts_validate(out->opts, descs, k, who, err);
  free(descs);
  if (st != FSDPC_OK)
    fsdpc__ckpt_formats_free(out);
  return st;
}

fsdpc_status fsdpc__ckpt_probe(fsdpc_registry *reg, const fsdpc_component *first, const char *dir,
                               const fsdpc_component **out, fsdpc_err *err) {
  struct stat sb;
  if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "checkpoint %s: no such folder", dir);
  if (first && fsdpc__call_sd_probe(first, dir) == FSDPC_OK) {
    *out = first;
    return FSDPC_OK;
  }
  for (int i = 0; i < fsdpc__registry_count(reg); i++) {
    const fsdpc_component *c = fsdpc__registry_at(reg, i);
    if (c->desc->kind != FSDPC_KIND_STATEDICT)
      continue;
    if (fsdpc__call_sd_probe(c, dir) == FSDPC_OK) {
      *out = c;
      return FSDPC_OK;
    }
  }
  return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                     "checkpoint %s: no statedict plugin recognises this folder (no meta.json "
                     "of a sharded checkpoint, no model.safetensors of a full one)",
                     dir);
}
