/* `fsdpc data prepare`: JSONL datasets (text, instruction, prompt/completion,
 * chat) -> a token file of whole examples with a loss mask. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data_cli.h"

static const char prepare_help[] =
    "usage: fsdpc data prepare --in FILE.jsonl [--in ...] --tokenizer T --out FILE.tok [options]\n"
    "Renders and tokenizes JSONL examples (one JSON object per line, read as Python reads\n"
    "it; or a JSON array of objects; .gz too) into a token file of whole examples with a\n"
    "loss mask (docs/data.md):\n"
    "  text               {\"text\": ...}: every token is trained\n"
    "  instruction        {\"instruction\", \"input\"?, \"output\", \"system\"?}: loss on output\n"
    "  prompt_completion  {\"prompt\", \"completion\"}: loss on the completion\n"
    "  chat               {\"messages\": [{\"role\", \"content\"}]} or ShareGPT\n"
    "                     {\"conversations\": [{\"from\", \"value\"}]}: loss on assistant turns\n"
    "  preference         {\"prompt\"?, \"chosen\", \"rejected\"} (TRL's): strings or message\n"
    "                     lists; a (chosen, rejected) pair for dpo, simpo, ...: loss on each\n"
    "                     completion\n"
    "options:\n"
    "  --format F          text|instruction|prompt_completion|chat|preference\n"
    "                      (default: detected)\n"
    "  --tokenizer T       byte, a tokenizer.json, or a model folder (default byte)\n"
    "  --chat-template F   a Jinja template file (default: the model folder's own)\n"
    "  --template-name N   one of several named templates in tokenizer_config.json\n"
    "  --train-on W        chat: assistant (default), all or last_assistant\n"
    "  --no-train-on-reasoning  chat: leave assistant reasoning out of the loss\n"
    "  --template-kwargs J chat: extra template variables, a JSON object\n"
    "                      ('{\"enable_thinking\": false}'); over data.template_kwargs\n"
    "  --text-field K, --prompt-field K, --completion-field K, --instruction-field K,\n"
    "  --input-field K, --output-field K, --system-field K, --messages-field K\n"
    "                      field names (defaults: the names above)\n"
    "  --skip-bad          skip bad examples and count them instead of failing\n"
    "  --threads N         worker threads (default: all cores)\n"
    "  --config CFG.yaml   take data.* keys (format, fields, train_on, ...) from a config;\n"
    "                      options given here win\n"
    "  --dry-run           check everything, write nothing\n"
    "  --show K            print the first K examples with their masks (default 0, 3 with\n"
    "                      --dry-run); tokens that are not trained on are shown in {{ }}\n"
    "  (limits: data.max_line_bytes, data.max_input_bytes through --config)\n";

enum {
  P_IN = 256,
  P_OUT,
  P_CONFIG,
  P_FORMAT,
  P_TRAIN_ON,
  P_THREADS,
  P_SHOW,
  P_DRY,
  P_SKIP_BAD,
  P_NO_REASONING,
  P_FIELD0, /* the string options below, in the order of their table */
};
/* The string options (P_FIELD0 + i), each one field of fsdpc_prepare_args. */
static const size_t fields[] = {
    offsetof(fsdpc_prepare_args, tokenizer),         offsetof(fsdpc_prepare_args, chat_template),
    offsetof(fsdpc_prepare_args, template_name),     offsetof(fsdpc_prepare_args, text_field),
    offsetof(fsdpc_prepare_args, prompt_field),      offsetof(fsdpc_prepare_args, completion_field),
    offsetof(fsdpc_prepare_args, instruction_field), offsetof(fsdpc_prepare_args, input_field),
    offsetof(fsdpc_prepare_args, output_field),      offsetof(fsdpc_prepare_args, system_field),
    offsetof(fsdpc_prepare_args, messages_field),    offsetof(fsdpc_prepare_args, template_kwargs),
};
#define N_FIELDS ((int)(sizeof fields / sizeof fields[0]))
static const cli_opt prepare_opts[] = {
    {"in", P_IN, "FILE"},
    {"out", P_OUT, "FILE"},
    {"config", P_CONFIG, "CFG"},
    {"format", P_FORMAT, "text|instruction|prompt_completion|chat|preference|auto"},
    {"train-on", P_TRAIN_ON, "assistant|all|last_assistant"},
    {"threads", P_THREADS, "N"},
    {"show", P_SHOW, "K"},
    {"dry-run", P_DRY, NULL},
    {"skip-bad", P_SKIP_BAD, NULL},
    {"no-train-on-reasoning", P_NO_REASONING, NULL},
    {"tokenizer", P_FIELD0 + 0, "T"},
    {"chat-template", P_FIELD0 + 1, "F"},
    {"template-name", P_FIELD0 + 2, "N"},
    {"text-field", P_FIELD0 + 3, "K"},
    {"prompt-field", P_FIELD0 + 4, "K"},
    {"completion-field", P_FIELD0 + 5, "K"},
    {"instruction-field", P_FIELD0 + 6, "K"},
    {"input-field", P_FIELD0 + 7, "K"},
    {"output-field", P_FIELD0 + 8, "K"},
    {"system-field", P_FIELD0 + 9, "K"},
    {"messages-field", P_FIELD0 + 10, "K"},
    {"template-kwargs", P_FIELD0 + 11, "J"},
    {0}};
const cli_cmd fsdpc__data_prepare_cmd = {"data prepare", prepare_help, prepare_opts};

typedef struct prep_cli {
  fsdpc_prepare_args a;
  const char **inputs, *cfg_path;
} prep_cli;

/* One argument of prepare: 1, or 0 after a usage error. */
static int prepare_arg(void *ctx, int r, const char *v) {
  const cli_cmd *cmd = &fsdpc__data_prepare_cmd;
  prep_cli *p = ctx;
  fsdpc_prepare_args *a = &p->a;
  static const char *const formats[] = {"text", "instruction", "prompt_completion",
                                        "chat", "preference",  "auto"};
  static const char *const train_on[] = {"assistant", "all", "last_assistant"};
  int i;
  if (r >= P_FIELD0 && r < P_FIELD0 + N_FIELDS) {
    *(const char **)((char *)a + fields[r - P_FIELD0]) = v;
    return 1;
  }
  switch (r) {
  case P_IN:
    p->inputs[a->n_inputs++] = v;
    return 1;
  case P_OUT:
    return (a->out = v) != NULL;
  case P_CONFIG:
    return (p->cfg_path = v) != NULL;
  case P_FORMAT:
    return (i = cli_choice(cmd, "format", v, formats, 6)) >= 0 && (a->format = formats[i]);
  case P_TRAIN_ON:
    return (i = cli_choice(cmd, "train-on", v, train_on, 3)) >= 0 && (a->train_on = train_on[i]);
  case P_THREADS:
    return cli_i32(cmd, "threads", v, 0, 1024, &a->threads);
  case P_SHOW:
    return cli_int(cmd, "show", v, 0, 1000000, &a->show);
  case P_DRY:
    return (a->dry_run = 1);
  case P_SKIP_BAD:
    return (a->skip_bad = 1);
  case P_NO_REASONING:
    a->train_on_reasoning = 0;
    return 1;
  default:
    return cli_usage_error(cmd, "unexpected argument '%s'", v) == 0;
  }
}

static void print_result(const fsdpc_prepare_args *a, const fsdpc_prepare_result *st) {
  double mb = (double)st->bytes_in / 1e6;
  printf("%s %lld examples (%s): %lld tokens, %lld targets (%.1f%%), from %.1f MB in %.2f s "
         "(%.1f MB/s, %.0f examples/s)%s%s\n",
         a->dry_run ? "checked" : "prepared", (long long)st->examples, st->format,
         (long long)st->tokens, (long long)st->target_tokens,
         st->tokens ? 100.0 * (double)st->target_tokens / (double)st->tokens : 0.0, mb, st->seconds,
         st->seconds > 0 ? mb / st->seconds : 0.0,
         st->seconds > 0 ? (double)st->examples / st->seconds : 0.0, a->dry_run ? "" : " -> ",
         a->dry_run ? "" : a->out);
  if (st->skipped)
    printf("skipped %lld bad example(s) of %lld lines; first: %s\n", (long long)st->skipped,
           (long long)st->lines, st->first_skip);
  if (st->weight_zero)
    printf("left out %lld example(s) of weight 0\n", (long long)st->weight_zero);
}

int fsdpc__data_prepare(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__data_prepare_cmd;
  prep_cli p = {.inputs = calloc((size_t)argc + 1, sizeof(char *))};
  fsdpc_prepare_args_init(&p.a);
  p.a.inputs = p.inputs;
  int rc = p.inputs ? cli_parse(cmd, argc, argv, prepare_arg, &p) : 1;
  fsdpc_prepare_args a = p.a;
  const char **inputs = p.inputs, *cfg_path = p.cfg_path;
  fsdpc_config *cfg = NULL;
  fsdpc_err err = {0};
  if (rc < 0 && cfg_path && fsdpc_config_load(cfg_path, NULL, 0, &cfg, &err) != FSDPC_OK)
    rc = cli_fail(cmd, err.msg);
  a.config = cfg;
  if (rc < 0 && ((a.n_inputs == 0 && !cfg) || (!a.out && !a.dry_run)))
    rc = cli_usage_error(cmd, "--in FILE and --out FILE are required");
  fsdpc_prepare_result res = {.struct_size = sizeof res};
  if (rc < 0 && fsdpc_data_prepare(&a, &res, &err) != FSDPC_OK)
    rc = cli_fail(cmd, err.msg);
  if (rc < 0) {
    print_result(&a, &res);
    rc = 0;
  }
  fsdpc_config_destroy(cfg);
  free(inputs);
  return rc;
}
