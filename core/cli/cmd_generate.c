/* fsdpc generate MODEL [--prompt TEXT | --file prompts.jsonl] [options]:
 * text from an HF folder or any fsdpc checkpoint, with a KV cache, greedy
 * or sampled, streamed to the terminal (docs/generate.md). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commands.h"
#include "data/chat.h"
#include "infer/infer.h"
#include "train/session.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/mem.h"

static void usage(FILE *f) {
  fprintf(
      f, "usage: fsdpc generate MODEL (--prompt TEXT | --prompt-ids 1,2,3 | --file F.jsonl)\n"
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
         "                         step (0..100; the logits then go to the host each step)\n");
}

typedef struct prompt {
  int32_t *ids;
  int n;
  char *text; /* as given, for --json */
} prompt;

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

static fsdpc_status tokenize(const fsdpc_tokenizer *tok, const char *text, int bos, prompt *p,
                             fsdpc_err *err) {
  int32_t *ids = NULL;
  int64_t n = 0;
  FSDPC_TRY(fsdpc__tokenizer_encode_alloc(tok, text, strlen(text), &ids, &n, err));
  p->ids = malloc(((size_t)n + 1) * sizeof *p->ids);
  if (!p->ids) {
    free(ids);
    return fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
  }
  p->n = 0;
  if (bos >= 0)
    p->ids[p->n++] = bos;
  memcpy(p->ids + p->n, ids, (size_t)n * sizeof *ids);
  p->n += (int)n;
  free(ids);
  if (p->n == 0)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "an empty prompt");
  return FSDPC_OK;
}

/* How text becomes prompt ids: the tokenizer, the BOS to put first (-1 =
 * none), and with --chat the model's chat template and system message. */
typedef struct prompter {
  fsdpc_tokenizer *tok;
  int bos;
  fsdpc_chat_template *chat; /* NULL = plain text */
  const char *system;
} prompter;

/* messages (a JSON array) or, with --chat, text as the user's turn: the
 * rendered conversation with the generation prompt; else text as given. */
static fsdpc_status make_prompt(const prompter *pr, const char *text, const cJSON *messages,
                                prompt *p, fsdpc_err *err) {
  if (!messages && !pr->chat)
    return tokenize(pr->tok, text, pr->bos, p, err);
  if (!pr->chat)
    return fsdpc__fail(err, FSDPC_INVALID_USAGE,
                       "\"messages\" need the model's chat template: pass --chat");
  cJSON *own = NULL;
  if (!messages) {
    own = cJSON_CreateArray();
    cJSON *m;
    if (pr->system) {
      m = cJSON_CreateObject();
      cJSON_AddStringToObject(m, "role", "system");
      cJSON_AddStringToObject(m, "content", pr->system);
      cJSON_AddItemToArray(own, m);
    }
    m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    cJSON_AddStringToObject(m, "content", text);
    cJSON_AddItemToArray(own, m);
    messages = own;
  }
  char *rendered = NULL;
  size_t len = 0;
  fsdpc_status st = fsdpc__chat_render(pr->chat, messages, 1, FSDPC_TRAIN_ON_ALL, &rendered, &len,
                                       NULL, NULL, err);
  /* The template writes its own BOS text; special tokens in it become ids. */
  if (st == FSDPC_OK)
    st = tokenize(pr->tok, rendered, -1, p, err);
  free(rendered);
  cJSON_Delete(own);
  return st;
}

/* Prompts of a JSONL file: {"prompt": TEXT}, {"messages": [...]} or
 * {"ids": [..]} per line. */
static fsdpc_status read_file(const char *path, const prompter *pr, prompt **out, int *n,
                              fsdpc_err *err) {
  /* a FIFO or device is refused before anything blocks on it */
  int fd = fsdpc__open_regular(path, 0);
  FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
  if (!f) {
    char why[128];
    fsdpc__open_regular_why(fd, 0, why, sizeof why);
    if (fd >= 0)
      close(fd);
    return fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: cannot open: %s", path, why);
  }
  char *line = NULL;
  size_t cap = 0;
  int lineno = 0, have = 0, room = 0;
  prompt *ps = NULL;
  fsdpc_status st = FSDPC_OK;
  while (st == FSDPC_OK && getline(&line, &cap, f) > 0) {
    lineno++;
    if (strspn(line, " \t\r\n") == strlen(line))
      continue;
    cJSON *o = cJSON_Parse(line);
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(o, "prompt");
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(o, "ids");
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(o, "messages");
    if (have == room) {
      room = room ? 2 * room : 16;
      prompt *bigger = realloc(ps, (size_t)room * sizeof *ps);
      if (!bigger) {
        cJSON_Delete(o);
        st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
        break;
      }
      ps = bigger;
    }
    prompt *p = &ps[have];
    memset(p, 0, sizeof *p);
    if (cJSON_IsString(pt)) {
      p->text = strdup(pt->valuestring);
      st = make_prompt(pr, pt->valuestring, NULL, p, err);
    } else if (cJSON_IsArray(msgs)) {
      p->text = cJSON_PrintUnformatted(msgs);
      st = make_prompt(pr, NULL, msgs, p, err);
    } else if (cJSON_IsArray(ids) && cJSON_GetArraySize(ids) > 0) {
      p->ids = malloc((size_t)cJSON_GetArraySize(ids) * sizeof *p->ids);
      for (const cJSON *e = ids->child; p->ids && e; e = e->next) {
        if (!cJSON_IsNumber(e))
          break;
        p->ids[p->n++] = (int32_t)e->valuedouble;
      }
      if (!p->ids || p->n != cJSON_GetArraySize(ids))
        st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s:%d: \"ids\" must be a list of token ids",
                         path, lineno);
    } else {
      st = fsdpc__fail(
          err, FSDPC_INVALID_USAGE,
          "%s:%d: expected a JSON object with \"prompt\" (text), \"messages\" or \"ids\"", path,
          lineno);
    }
    have++;
    cJSON_Delete(o);
    if (st != FSDPC_OK)
      fsdpc__err_prefix(err, "%s:%d", path, lineno);
  }
  free(line);
  fclose(f);
  if (st == FSDPC_OK && have == 0)
    st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "%s: no prompts", path);
  *out = ps;
  *n = have;
  return st;
}

static void on_text(void *ctx, int row, const char *text, size_t len) {
  (void)ctx;
  (void)row;
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

static void print_json(int index, const prompt *p, const fsdpc_gen_result *r, double secs,
                       int64_t peak, int top) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "index", index);
  char *pc = p->text ? utf8_clean(p->text, strlen(p->text)) : NULL;
  if (pc)
    cJSON_AddStringToObject(o, "prompt", pc);
  free(pc);
  cJSON *pids = cJSON_AddArrayToObject(o, "prompt_ids");
  for (int i = 0; i < p->n; i++)
    cJSON_AddItemToArray(pids, cJSON_CreateNumber(p->ids[i]));
  cJSON *ids = cJSON_AddArrayToObject(o, "ids");
  for (int i = 0; i < r->n_ids; i++)
    cJSON_AddItemToArray(ids, cJSON_CreateNumber(r->ids[i]));
  char *clean = utf8_clean(r->text ? r->text : "", r->text ? strlen(r->text) : 0);
  cJSON_AddStringToObject(o, "text", clean ? clean : "");
  free(clean);
  cJSON_AddStringToObject(o, "stop_reason", r->stop_reason ? r->stop_reason : "length");
  cJSON_AddNumberToObject(o, "batch_seconds", secs);
  cJSON_AddNumberToObject(o, "peak_device_bytes", (double)peak);
  int64_t rss, hwm;
  fsdpc__mem_rss(&rss, &hwm);
  cJSON_AddNumberToObject(o, "peak_host_rss_bytes", (double)hwm);
  if (top > 0 && r->top_ids) { /* per generated token: [[id, logit], ...], highest first */
    cJSON *t = cJSON_AddArrayToObject(o, "top_logits");
    for (int i = 0; i < r->n_ids; i++) {
      cJSON *step = cJSON_CreateArray();
      for (int j = 0; j < top; j++) {
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateNumber(r->top_ids[(size_t)i * top + j]));
        cJSON_AddItemToArray(pair, cJSON_CreateNumber(r->top_vals[(size_t)i * top + j]));
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

typedef struct gen_args {
  const char *model, *prompt, *prompt_ids, *file, *system, *device, *attention;
  int max_new, batch, no_bos, chat, json, ignore_eos, top_logits, no_graph;
  fsdpc_sampling samp;
  const char **stop;
  int n_stop;
  const char **ov;
  int n_ov;
} gen_args;

static int parse_args(int argc, char **argv, gen_args *a) {
  for (int i = 1; i < argc; i++) {
    const char *s = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
      usage(stdout);
      return 0;
    }
    if (strcmp(s, "--no-bos") == 0 || strcmp(s, "--chat") == 0 || strcmp(s, "--json") == 0 ||
        strcmp(s, "--ignore-eos") == 0 || strcmp(s, "--no-cuda-graph") == 0) {
      *(strcmp(s, "--no-cuda-graph") == 0 ? &a->no_graph
        : s[2] == 'n'                     ? &a->no_bos
        : s[2] == 'c'                     ? &a->chat
        : s[2] == 'j'                     ? &a->json
                                          : &a->ignore_eos) = 1;
      continue;
    }
    if (s[0] == '-' && !v) {
      fprintf(stderr, "fsdpc generate: %s needs a value\n", s);
      return 2;
    }
    int ok = 1;
    char *end = NULL;
    if (strcmp(s, "--prompt") == 0)
      a->prompt = v;
    else if (strcmp(s, "--prompt-ids") == 0)
      a->prompt_ids = v;
    else if (strcmp(s, "--file") == 0)
      a->file = v;
    else if (strcmp(s, "--system") == 0)
      a->system = v;
    else if (strcmp(s, "--device") == 0)
      a->device = v;
    else if (strcmp(s, "--attention") == 0)
      a->attention = v;
    else if (strcmp(s, "--stop") == 0)
      a->stop[a->n_stop++] = v;
    else if (strcmp(s, "--max-new-tokens") == 0)
      ok = (a->max_new = (int)strtol(v, &end, 10)) > 0;
    else if (strcmp(s, "--batch-size") == 0)
      ok = (a->batch = (int)strtol(v, &end, 10)) > 0;
    else if (strcmp(s, "--top-logits") == 0)
      ok = (a->top_logits = (int)strtol(v, &end, 10)) >= 0 && a->top_logits <= 100;
    else if (strcmp(s, "--top-k") == 0)
      ok = (a->samp.top_k = (int)strtol(v, &end, 10)) >= 0;
    else if (strcmp(s, "--seed") == 0)
      a->samp.seed = strtoull(v, &end, 10);
    else if (strcmp(s, "--temperature") == 0)
      ok = (a->samp.temperature = strtod(v, &end)) >= 0;
    else if (strcmp(s, "--top-p") == 0)
      ok = (a->samp.top_p = strtod(v, &end)) > 0 && a->samp.top_p <= 1;
    else if (s[0] == '-') {
      fprintf(stderr, "fsdpc generate: unknown option '%s' (`fsdpc generate --help`)\n", s);
      return 2;
    } else if (strchr(s, '=')) {
      a->ov[a->n_ov++] = s;
      continue;
    } else if (!a->model) {
      a->model = s;
      continue;
    } else {
      fprintf(stderr, "fsdpc generate: unexpected argument '%s'\n", s);
      return 2;
    }
    if (!ok || (end && *end)) {
      fprintf(stderr, "fsdpc generate: bad value '%s' for %s\n", v, s);
      return 2;
    }
    i++;
  }
  if (!a->model || !!a->prompt + !!a->prompt_ids + !!a->file != 1) {
    usage(stderr);
    return 2;
  }
  return -1;
}

/* The model's tokenizer, and with --chat its chat template (infer/prompt.c). */
static fsdpc_status open_prompter(const fsdpc_infer_model *m, const gen_args *a, prompter *pr,
                                  fsdpc_err *err) {
  FSDPC_TRY(fsdpc__infer_tokenizer(m, &pr->tok, err));
  pr->bos = -1;
  if (!a->no_bos) /* packed byte-tokenizer data has EOS before every document */
    pr->bos = strcmp(fsdpc__tokenizer_name(pr->tok), "byte") == 0 ? fsdpc__tokenizer_eos(pr->tok)
              : fsdpc__tokenizer_adds_bos(pr->tok)                ? fsdpc__tokenizer_bos(pr->tok)
                                                                  : -1;
  pr->system = a->system;
  return a->chat ? fsdpc__infer_chat_template(m, &pr->chat, err) : FSDPC_OK;
}

static int run(gen_args *a, fsdpc_err *err) {
  fsdpc_infer_model *m = NULL;
  prompt *ps = NULL;
  int np = 0, rc = 1;
  int32_t *eos = NULL;
  int n_eos = 0;
  fsdpc_infer_load_opts lo = {.dir = a->model,
                              .device = a->device,
                              .attention = a->attention,
                              .overrides = a->ov,
                              .n_overrides = a->n_ov};
  fsdpc_status st = fsdpc__infer_model_load(&lo, &m, err);
  prompter pr = {0};
  if (st == FSDPC_OK) {
    fsdpc__infer_sampling_defaults(m, &a->samp); /* what the flags left unset */
    st = open_prompter(m, a, &pr, err);
  }
  fsdpc_tokenizer *tok = pr.tok;
  if (st == FSDPC_OK && a->prompt) {
    if (!(ps = calloc(1, sizeof *ps)))
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    np = 1;
    if (st == FSDPC_OK) {
      ps[0].text = strdup(a->prompt);
      st = make_prompt(&pr, a->prompt, NULL, &ps[0], err);
    }
  } else if (st == FSDPC_OK && a->prompt_ids) {
    if (!(ps = calloc(1, sizeof *ps)))
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    np = 1;
    if (st == FSDPC_OK && !parse_ids(a->prompt_ids, &ps[0]))
      st = fsdpc__fail(err, FSDPC_INVALID_USAGE, "--prompt-ids: expected ids like 1,2,3");
  } else if (st == FSDPC_OK) {
    st = read_file(a->file, &pr, &ps, &np, err);
  }
  if (st == FSDPC_OK && !a->ignore_eos)
    st = fsdpc__infer_eos_ids(m->weights_dir, &m->shape, &eos, &n_eos, err);
  fsdpc_decoder_opts dopt = {0};
  if (st == FSDPC_OK)
    dopt = (fsdpc_decoder_opts){.shape = &m->shape,
                                .ops = m->ops,
                                .attention = m->attn,
                                .attention_opts = m->cfg->attention.options,
                                .no_graph = a->no_graph};
  int stream = np == 1 && !a->json;
  for (int b0 = 0; st == FSDPC_OK && b0 < np; b0 += a->batch) {
    int nb = np - b0 < a->batch ? np - b0 : a->batch;
    const int32_t **pp = calloc((size_t)nb, sizeof *pp);
    int *lens = calloc((size_t)nb, sizeof *lens);
    if (!pp || !lens)
      st = fsdpc__fail(err, FSDPC_SYSTEM_ERROR, "out of memory");
    for (int i = 0; st == FSDPC_OK && i < nb; i++) {
      pp[i] = ps[b0 + i].ids;
      lens[i] = ps[b0 + i].n;
    }
    fsdpc_gen_opts g = {.max_new_tokens = a->max_new,
                        .sampling = a->samp,
                        .eos = eos,
                        .n_eos = n_eos,
                        .stop = a->stop,
                        .n_stop = a->n_stop,
                        .tok = tok,
                        .on_text = stream ? on_text : NULL,
                        .first_row = b0,
                        .top_logits = a->json ? a->top_logits : 0};
    fsdpc_gen_result *res = NULL;
    double t0 = fsdpc__now();
    if (st == FSDPC_OK)
      st = fsdpc__generate(&dopt, &m->weights, pp, lens, nb, &g, &res, err);
    double secs = fsdpc__now() - t0;
    for (int i = 0; st == FSDPC_OK && i < nb; i++) {
      if (a->json)
        print_json(b0 + i, &ps[b0 + i], &res[i], secs, fsdpc__infer_model_peak_bytes(m),
                   a->top_logits);
      else if (!stream)
        printf("%s\n", res[i].text);
    }
    if (st == FSDPC_OK && stream)
      printf("\n");
    fsdpc__gen_results_free(res, nb);
    free(pp);
    free(lens);
  }
  if (st == FSDPC_OK)
    rc = 0;
  for (int i = 0; ps && i < np; i++) {
    free(ps[i].ids);
    free(ps[i].text);
  }
  free(ps);
  free(eos);
  fsdpc__tokenizer_destroy(pr.tok);
  fsdpc__chat_template_destroy(pr.chat);
  fsdpc__infer_model_free(m);
  return rc;
}

int fsdpc__cmd_generate(int argc, char **argv) {
  /* -1: not given, the model's generation_config.json decides */
  gen_args a = {.max_new = 128, .batch = 16, .samp = {.temperature = -1, .top_k = -1, .top_p = -1}};
  a.stop = calloc((size_t)argc + 1, sizeof *a.stop);
  a.ov = calloc((size_t)argc + 1, sizeof *a.ov);
  if (!a.stop || !a.ov)
    return 1;
  int rc = parse_args(argc, argv, &a);
  if (rc < 0) {
    fsdpc__log_setup(FSDPC_LOG_WARN, -1);
    fsdpc_err err = {0};
    rc = run(&a, &err);
    if (rc)
      fprintf(stderr, "fsdpc generate: %s\n", err.msg);
  }
  free(a.stop);
  free(a.ov);
  return rc;
}
