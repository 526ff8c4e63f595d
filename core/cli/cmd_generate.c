/* fsdpc generate MODEL [--prompt TEXT | --file prompts.jsonl] [options]:
 * text from an HF folder or any fsdpc checkpoint, with a KV cache, greedy
 * or sampled, streamed to the terminal (fsdpc_model_load, fsdpc_generate;
 * docs/generate.md). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "commands.h"

static const char help[] =
    "usage: fsdpc generate MODEL (--prompt TEXT | --prompt-ids 1,2,3 | --file F.jsonl)\n"
    "                      [options] [section.key=value ...]\n"
    "\n"
    "Generates text from MODEL (a Hugging Face folder or any fsdpc checkpoint) with a\n"
    "KV cache. Stops at the generation config's EOS ids, a --stop string or\n"
    "--max-new-tokens.\n"
    "  --prompt TEXT          one prompt (its text streams to the terminal)\n"
    "  --prompt-ids LIST      one prompt as token ids (no tokenizer needed)\n"
    "  --file F.jsonl         one prompt per line: {\"prompt\": \"...\"} or {\"ids\": [..]};\n"
    "                         run in padded batches, one forward per token for all\n"
    "  --batch-size N         prompts per batch with --file (default 16)\n"
    "  --max-new-tokens N     default 128\n"
    "  --temperature T        0 = greedy; > 0 samples (default: the model's\n"
    "                         generation_config.json, else greedy)\n"
    "  --top-k K, --top-p P   sampling filters (default: generation_config.json)\n"
    "  --seed S               sampling seed (default 0)\n"
    "  --stop STR             stop string (repeatable); the text is cut before it\n"
    "  --no-bos               do not start prompts with the BOS token\n"
    "  --ignore-eos           run every prompt to --max-new-tokens (benchmarks)\n"
    "  --chat, --system TEXT  the prompt is the user's turn, rendered with the model's\n"
    "                         chat template (and a system message); with --file a\n"
    "                         line may give {\"messages\": [...]} instead\n"
    "  --device cpu|cuda|auto default auto (cuda when a GPU is visible)\n"
    "  --attention NAME       attention plugin for the prompt (naive, flash; default\n"
    "                         the config's attention.impl)\n"
    "  --json                 one JSON line per prompt: ids, text, stop reason, timing,\n"
    "                         peak device memory\n"
    "  --no-cuda-graph        run each decode step kernel by kernel (by default a CUDA\n"
    "                         step is recorded once as a graph and replayed)\n"
    "  --top-logits N         with --json: the N highest (id, logit) pairs of each\n"
    "                         step (0..100; the logits then go to the host each step)\n";

enum {
  O_PROMPT = 256,
  O_PROMPT_IDS,
  O_FILE,
  O_BATCH,
  O_MAX_NEW,
  O_TEMP,
  O_TOP_K,
  O_TOP_P,
  O_SEED,
  O_STOP,
  O_NO_BOS,
  O_IGNORE_EOS,
  O_CHAT,
  O_SYSTEM,
  O_DEVICE,
  O_ATTENTION,
  O_JSON,
  O_NO_GRAPH,
  O_TOP_LOGITS,
};
static const cli_opt opts[] = {{"prompt", O_PROMPT, "TEXT"},
                               {"prompt-ids", O_PROMPT_IDS, "LIST"},
                               {"file", O_FILE, "F.jsonl"},
                               {"batch-size", O_BATCH, "N"},
                               {"max-new-tokens", O_MAX_NEW, "N"},
                               {"temperature", O_TEMP, "T"},
                               {"top-k", O_TOP_K, "K"},
                               {"top-p", O_TOP_P, "P"},
                               {"seed", O_SEED, "S"},
                               {"stop", O_STOP, "STR"},
                               {"no-bos", O_NO_BOS, NULL},
                               {"ignore-eos", O_IGNORE_EOS, NULL},
                               {"chat", O_CHAT, NULL},
                               {"system", O_SYSTEM, "TEXT"},
                               {"device", O_DEVICE, "cpu|cuda|auto"},
                               {"attention", O_ATTENTION, "NAME"},
                               {"json", O_JSON, NULL},
                               {"no-cuda-graph", O_NO_GRAPH, NULL},
                               {"top-logits", O_TOP_LOGITS, "N"},
                               {0}};
const cli_cmd fsdpc__generate_cmd = {"generate", help, opts};

typedef struct prompt {
  int32_t *ids; /* fsdpc_free */
  int32_t n;
  char *text; /* as given, for --json */
} prompt;

typedef struct gen_cli {
  const char *model, *prompt, *prompt_ids, *file, *device, *attention;
  int32_t batch, json;
  fsdpc_prompt_args pa;
  fsdpc_generate_args ga;
  const char **stop;
  const char **ov;
  int n_ov;
} gen_cli;

/* One argument of generate: 1, or 0 after a usage error. */
static int gen_arg(void *ctx, int r, const char *v) {
  static const char *const devices[] = {"cpu", "cuda", "auto"};
  const cli_cmd *cmd = &fsdpc__generate_cmd;
  gen_cli *a = ctx;
  fsdpc_generate_args *g = &a->ga;
  switch (r) {
  case O_PROMPT:
    return (a->prompt = v) != NULL;
  case O_PROMPT_IDS:
    return (a->prompt_ids = v) != NULL;
  case O_FILE:
    return (a->file = v) != NULL;
  case O_SYSTEM:
    return (a->pa.system = v) != NULL;
  case O_DEVICE:
    return cli_choice(cmd, "device", v, devices, 3) >= 0 && (a->device = v);
  case O_ATTENTION:
    return (a->attention = v) != NULL;
  case O_STOP:
    a->stop[g->n_stop++] = v;
    return 1;
  case O_BATCH:
    return cli_i32(cmd, "batch-size", v, 1, 1 << 20, &a->batch);
  case O_MAX_NEW:
    return cli_i32(cmd, "max-new-tokens", v, 1, INT32_MAX, &g->max_new_tokens);
  case O_TOP_LOGITS:
    return cli_i32(cmd, "top-logits", v, 0, 100, &g->top_logits);
  case O_TOP_K:
    return cli_i32(cmd, "top-k", v, 0, INT32_MAX, &g->top_k);
  case O_SEED:
    return cli_u64(cmd, "seed", v, &g->seed);
  case O_TEMP:
    return cli_double(cmd, "temperature", v, 0, 1e9, 0, &g->temperature);
  case O_TOP_P:
    return cli_double(cmd, "top-p", v, 0, 1, 1, &g->top_p);
  case O_NO_BOS:
    return (a->pa.no_bos = 1);
  case O_IGNORE_EOS:
    return (g->ignore_eos = 1);
  case O_CHAT:
    return (a->pa.chat = 1);
  case O_JSON:
    return (a->json = 1);
  case O_NO_GRAPH:
    return (g->no_cuda_graph = 1);
  default: /* CLI_POS */
    if (strchr(v, '='))
      a->ov[a->n_ov++] = v;
    else if (!a->model)
      a->model = v;
    else
      return cli_usage_error(cmd, "unexpected argument '%s'", v) == 0;
    return 1;
  }
}

/* -1 to go on, else the exit code. */
static int parse(int argc, char **argv, gen_cli *a) {
  const cli_cmd *cmd = &fsdpc__generate_cmd;
  int rc = cli_parse(cmd, argc, argv, gen_arg, a);
  if (rc < 0 && (!a->model || !!a->prompt + !!a->prompt_ids + !!a->file != 1))
    rc = cli_usage_error(cmd, "MODEL and one of --prompt, --prompt-ids, --file are needed");
  return rc;
}

static int parse_ids(const char *s, prompt *p) {
  int cap = 16;
  p->ids = malloc((size_t)cap * sizeof *p->ids);
  p->n = 0;
  while (p->ids && *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 0 || v > 0x7fffffff)
      return 0;
    if (p->n == cap && !(p->ids = realloc(p->ids, (size_t)(cap *= 2) * sizeof *p->ids)))
      return 0;
    p->ids[p->n++] = (int32_t)v;
    s = *end == ',' ? end + 1 : end;
    if (*end && *end != ',')
      return 0;
  }
  return p->ids && p->n > 0;
}

/* One line of a prompts file: {"prompt": TEXT}, {"messages": [...]} or
 * {"ids": [..]}; errors into msg. */
static fsdpc_status file_prompt(fsdpc_model *m, const gen_cli *a, const char *line, prompt *p,
                                fsdpc_err *err) {
  cJSON *o = cJSON_Parse(line);
  const cJSON *pt = cJSON_GetObjectItemCaseSensitive(o, "prompt");
  const cJSON *ids = cJSON_GetObjectItemCaseSensitive(o, "ids");
  const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(o, "messages");
  fsdpc_status st = FSDPC_OK;
  if (cJSON_IsString(pt)) {
    p->text = strdup(pt->valuestring);
    st = fsdpc_model_prompt(m, &a->pa, pt->valuestring, NULL, &p->ids, &p->n, err);
  } else if (cJSON_IsArray(msgs) && !a->pa.chat) {
    st = cli_error(err, FSDPC_INVALID_USAGE,
                   "\"messages\" need the model's chat template: pass --chat");
  } else if (cJSON_IsArray(msgs)) {
    p->text = cJSON_PrintUnformatted(msgs);
    st = fsdpc_model_prompt(m, &a->pa, NULL, p->text, &p->ids, &p->n, err);
  } else if (cJSON_IsArray(ids) && cJSON_GetArraySize(ids) > 0) {
    int n = cJSON_GetArraySize(ids);
    p->ids = malloc((size_t)n * sizeof *p->ids);
    for (const cJSON *e = ids->child; p->ids && e && cJSON_IsNumber(e); e = e->next)
      p->ids[p->n++] = (int32_t)e->valuedouble;
    if (!p->ids || p->n != n)
      st = cli_error(err, FSDPC_INVALID_USAGE, "\"ids\" must be a list of token ids");
  } else {
    st = cli_error(err, FSDPC_INVALID_USAGE,
                   "expected a JSON object with \"prompt\" (text), \"messages\" or \"ids\"");
  }
  cJSON_Delete(o);
  return st;
}

/* The prompts of --file, each as ids; one line on failure names the line. */
static fsdpc_status read_file(fsdpc_model *m, const gen_cli *a, prompt **out, int *n,
                              fsdpc_err *err) {
  FILE *f = fsdpc_open_input(a->file, err); /* a FIFO is refused, not waited on */
  if (!f)
    return err->status;
  char *line = NULL;
  size_t cap = 0;
  int lineno = 0, have = 0, room = 0;
  prompt *ps = NULL;
  fsdpc_status st = FSDPC_OK;
  while (st == FSDPC_OK && getline(&line, &cap, f) > 0) {
    lineno++;
    if (strspn(line, " \t\r\n") == strlen(line))
      continue;
    if (have == room) {
      prompt *bigger = realloc(ps, (size_t)(room = room ? 2 * room : 16) * sizeof *ps);
      if (!bigger) {
        st = cli_error(err, FSDPC_SYSTEM_ERROR, "out of memory");
        break;
      }
      ps = bigger;
    }
    memset(&ps[have], 0, sizeof ps[have]);
    if ((st = file_prompt(m, a, line, &ps[have++], err)) != FSDPC_OK) {
      char msg[sizeof err->msg];
      snprintf(msg, sizeof msg, "%s", err->msg);
      cli_error(err, st, "%s:%d: %s", a->file, lineno, msg);
    }
  }
  free(line);
  fclose(f);
  if (st == FSDPC_OK && have == 0)
    st = cli_error(err, FSDPC_INVALID_USAGE, "%s: no prompts", a->file);
  *out = ps;
  *n = have;
  return st;
}

static void on_text(void *user, int32_t index, const char *text, size_t len) {
  (void)user, (void)index;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
}

/* A copy of s (n bytes) that is valid UTF-8: each byte that starts no
 * well-formed sequence becomes U+FFFD (JSON output must be UTF-8; a byte
 * tokenizer or a cut BPE token can yield any bytes). */
static char *utf8_clean(const char *s, size_t n) {
  char *o = malloc(3 * n + 1);
  size_t k = 0;
  if (!o)
    return NULL;
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)s[i];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    int ok = len > 0 && i + (size_t)len <= n && !(len == 2 && c < 0xC2);
    for (int j = 1; ok && j < len; j++)
      ok = ((unsigned char)s[i + j] & 0xC0) == 0x80;
    if (ok && c != 0) {
      memcpy(o + k, s + i, (size_t)len);
      k += (size_t)len;
      i += (size_t)len;
    } else {
      memcpy(o + k, "\xEF\xBF\xBD", 3);
      k += 3;
      i++;
    }
  }
  o[k] = '\0';
  return o;
}

static void add_string(cJSON *o, const char *key, const char *s) {
  char *clean = utf8_clean(s ? s : "", s ? strlen(s) : 0);
  cJSON_AddStringToObject(o, key, clean ? clean : "");
  free(clean);
}

static int64_t host_rss_peak(void) {
  FILE *f = fopen("/proc/self/status", "r");
  long long kib = 0;
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %lld kB", &kib) == 1)
      break;
  if (f)
    fclose(f);
  return (int64_t)kib * 1024;
}

static void print_json(int index, const prompt *p, const fsdpc_generation *r, double secs,
                       int64_t peak, int top) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "index", index);
  if (p->text)
    add_string(o, "prompt", p->text);
  cJSON *pids = cJSON_AddArrayToObject(o, "prompt_ids");
  for (int i = 0; i < p->n; i++)
    cJSON_AddItemToArray(pids, cJSON_CreateNumber(p->ids[i]));
  cJSON *ids = cJSON_AddArrayToObject(o, "ids");
  for (int i = 0; i < r->n_ids; i++)
    cJSON_AddItemToArray(ids, cJSON_CreateNumber(r->ids[i]));
  add_string(o, "text", r->text);
  cJSON_AddStringToObject(o, "stop_reason", r->stop_reason);
  cJSON_AddNumberToObject(o, "batch_seconds", secs);
  cJSON_AddNumberToObject(o, "peak_device_bytes", (double)peak);
  cJSON_AddNumberToObject(o, "peak_host_rss_bytes", (double)host_rss_peak());
  if (top > 0 && r->top_ids) { /* per generated token: [[id, logit], ...], highest first */
    cJSON *t = cJSON_AddArrayToObject(o, "top_logits");
    for (int i = 0; i < r->n_ids; i++) {
      cJSON *step = cJSON_CreateArray();
      for (int j = 0; j < top; j++) {
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateNumber(r->top_ids[(size_t)i * top + j]));
        cJSON_AddItemToArray(pair, cJSON_CreateNumber(r->top_logits[(size_t)i * top + j]));
        cJSON_AddItemToArray(step, pair);
      }
      cJSON_AddItemToArray(t, step);
    }
  }
  char *t = cJSON_PrintUnformatted(o);
  if (t)
    printf("%s\n", t);
  cJSON_free(t);
  cJSON_Delete(o);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The prompts in padded batches of a->batch, each batch's answers printed
 * as they come. */
static fsdpc_status generate_all(fsdpc_model *m, gen_cli *a, const prompt *ps, int np,
                                 fsdpc_err *err) {
  int stream = np == 1 && !a->json;
  fsdpc_status st = FSDPC_OK;
  a->ga.on_text = stream ? on_text : NULL;
  if (!a->json)
    a->ga.top_logits = 0;
  for (int b0 = 0; st == FSDPC_OK && b0 < np; b0 += a->batch) {
    int nb = np - b0 < a->batch ? np - b0 : a->batch;
    const int32_t **pp = calloc((size_t)nb, sizeof *pp);
    int32_t *lens = calloc((size_t)nb, sizeof *lens);
    fsdpc_generation *res = NULL;
    for (int i = 0; pp && lens && i < nb; i++) {
      pp[i] = ps[b0 + i].ids;
      lens[i] = ps[b0 + i].n;
    }
    a->ga.first_index = b0;
    double t0 = now_s();
    st = pp && lens ? fsdpc_generate(m, pp, lens, nb, &a->ga, &res, err)
                    : cli_error(err, FSDPC_SYSTEM_ERROR, "out of memory");
    double secs = now_s() - t0;
    for (int i = 0; st == FSDPC_OK && i < nb; i++) {
      if (a->json)
        print_json(b0 + i, &ps[b0 + i], &res[i], secs, fsdpc_model_peak_bytes(m), a->ga.top_logits);
      else if (!stream)
        printf("%s\n", res[i].text);
    }
    if (st == FSDPC_OK && stream)
      printf("\n");
    fsdpc_generations_free(res, nb);
    free(pp);
    free(lens);
  }
  return st;
}

static int run(gen_cli *a) {
  fsdpc_err err = {0};
  fsdpc_model *m = NULL;
  prompt *ps = NULL;
  int np = 0;
  fsdpc_model_args ma = {.struct_size = sizeof ma,
                         .dir = a->model,
                         .device = a->device,
                         .attention = a->attention,
                         .overrides = a->ov,
                         .n_overrides = a->n_ov};
  fsdpc_status st = fsdpc_model_load(&ma, &m, &err);
  if (st == FSDPC_OK && (a->prompt || a->prompt_ids)) {
    np = 1;
    if (!(ps = calloc(1, sizeof *ps))) {
      st = FSDPC_SYSTEM_ERROR;
    } else if (a->prompt) {
      ps[0].text = strdup(a->prompt);
      st = fsdpc_model_prompt(m, &a->pa, a->prompt, NULL, &ps[0].ids, &ps[0].n, &err);
    } else if (!parse_ids(a->prompt_ids, &ps[0])) {
      st = cli_error(&err, FSDPC_INVALID_USAGE, "--prompt-ids: expected ids like 1,2,3");
    }
  } else if (st == FSDPC_OK) {
    st = read_file(m, a, &ps, &np, &err);
  }
  if (st == FSDPC_OK)
    st = generate_all(m, a, ps, np, &err);
  for (int i = 0; ps && i < np; i++) {
    fsdpc_free(ps[i].ids);
    free(ps[i].text);
  }
  free(ps);
  fsdpc_model_destroy(m);
  return st == FSDPC_OK ? 0 : cli_fail(&fsdpc__generate_cmd, err.msg);
}

int fsdpc__cmd_generate(int argc, char **argv) {
  gen_cli a = {.batch = 16};
  a.pa = (fsdpc_prompt_args){.struct_size = sizeof a.pa};
  /* sampling -1: not given, the model's generation_config.json decides */
  a.ga = (fsdpc_generate_args){.struct_size = sizeof a.ga,
                               .max_new_tokens = 128,
                               .temperature = -1,
                               .top_k = -1,
                               .top_p = -1};
  a.stop = calloc((size_t)argc + 1, sizeof *a.stop);
  a.ov = calloc((size_t)argc + 1, sizeof *a.ov);
  int rc = a.stop && a.ov ? parse(argc, argv, &a) : 1;
  a.ga.stop = a.stop;
  if (rc < 0) {
    fsdpc_set_log_level(FSDPC_LOG_WARN);
    rc = run(&a);
  }
  free(a.stop);
  free(a.ov);
  return rc;
}
