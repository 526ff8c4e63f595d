/* `fsdpc data prepare`: JSONL datasets (text, instruction, prompt/completion,
 * chat) -> a token file of whole examples with a loss mask. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "data/prepare.h"
#include "data_cli.h"
#include "train/dataset.h"

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
    "options:\n"
    "  --format F          text|instruction|prompt_completion|chat (default: detected)\n"
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

int fsdpc__data_prepare(int argc, char **argv) {
  const char *cmd = "prepare", *v, *cfg_path = NULL;
  fsdpc_prepare_opts o, cli;
  fsdpc__prepare_opts_default(&cli);
  cli.tokenizer = NULL; /* NULL below = not given on the command line */
  cli.chat_template = cli.template_name = NULL;
  cli.text_field = cli.prompt_field = cli.completion_field = cli.instruction_field = NULL;
  cli.input_field = cli.output_field = cli.system_field = cli.messages_field = NULL;
  cli.template_kwargs_json = NULL;
  cli.train_on_reasoning = -1;
  cli.train_on = -1;
  cli.show = -1;
  const char **inputs = calloc((size_t)argc, sizeof *inputs);
  int n_in = 0, rc = 2;
  if (!inputs)
    return 1;
  static const struct {
    const char *name;
    size_t off;
  } fields[] = {
      {"tokenizer", offsetof(fsdpc_prepare_opts, tokenizer)},
      {"chat-template", offsetof(fsdpc_prepare_opts, chat_template)},
      {"template-name", offsetof(fsdpc_prepare_opts, template_name)},
      {"text-field", offsetof(fsdpc_prepare_opts, text_field)},
      {"prompt-field", offsetof(fsdpc_prepare_opts, prompt_field)},
      {"completion-field", offsetof(fsdpc_prepare_opts, completion_field)},
      {"instruction-field", offsetof(fsdpc_prepare_opts, instruction_field)},
      {"input-field", offsetof(fsdpc_prepare_opts, input_field)},
      {"output-field", offsetof(fsdpc_prepare_opts, output_field)},
      {"system-field", offsetof(fsdpc_prepare_opts, system_field)},
      {"messages-field", offsetof(fsdpc_prepare_opts, messages_field)},
      {"template-kwargs", offsetof(fsdpc_prepare_opts, template_kwargs_json)},
  };
  int skip_bad = -1, format = -1;
  for (int i = 1; i < argc; i++) {
    int r = 0;
    if (fsdpc__data_is_help(argv[i])) {
      fputs(prepare_help, stdout);
      free(inputs);
      return 0;
    }
    int matched = 0;
    for (size_t f = 0; f < sizeof fields / sizeof fields[0] && !matched; f++)
      if ((r = fsdpc__data_opt_value(argc, argv, &i, fields[f].name, &v))) {
        if (r < 0)
          goto bad_missing;
        *(const char **)((char *)&cli + fields[f].off) = v;
        matched = 1;
      }
    if (matched)
      continue;
    if ((r = fsdpc__data_opt_value(argc, argv, &i, "in", &v))) {
      if (r < 0)
        goto bad_missing;
      inputs[n_in++] = v;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "out", &v))) {
      if (r < 0)
        goto bad_missing;
      cli.out = v;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "config", &v))) {
      if (r < 0)
        goto bad_missing;
      cfg_path = v;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "format", &v))) {
      if (r < 0)
        goto bad_missing;
      if ((format = fsdpc__prepare_format_parse(v)) < 0) {
        fprintf(stderr,
                "fsdpc data prepare: --format '%s': expected text, instruction, "
                "prompt_completion, chat or auto\n",
                v);
        goto out;
      }
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "train-on", &v))) {
      if (r < 0)
        goto bad_missing;
      if ((cli.train_on = fsdpc__prepare_train_on_parse(v)) < 0) {
        fprintf(stderr,
                "fsdpc data prepare: --train-on '%s': expected assistant, all or "
                "last_assistant\n",
                v);
        goto out;
      }
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "threads", &v))) {
      int64_t x;
      if (r < 0)
        goto bad_missing;
      if (!fsdpc__data_parse_i64(cmd, "threads", v, 0, 1024, &x))
        goto out;
      cli.threads = (int)x;
    } else if ((r = fsdpc__data_opt_value(argc, argv, &i, "show", &v))) {
      if (r < 0)
        goto bad_missing;
      if (!fsdpc__data_parse_i64(cmd, "show", v, 0, 1000000, &cli.show))
        goto out;
    } else if (strcmp(argv[i], "--dry-run") == 0) {
      cli.dry_run = 1;
    } else if (strcmp(argv[i], "--skip-bad") == 0) {
      skip_bad = 1;
    } else if (strcmp(argv[i], "--no-train-on-reasoning") == 0) {
      cli.train_on_reasoning = 0;
    } else {
      rc = fsdpc__data_bad_arg(cmd, argv[i], 0);
      goto out;
    }
    continue;
  bad_missing:
    rc = fsdpc__data_bad_arg(cmd, argv[i], 1);
    goto out;
  }
  fsdpc_config *cfg = NULL;
  fsdpc_err err = {0};
  fsdpc__prepare_opts_default(&o);
  if (cfg_path) {
    if (fsdpc__config_load(cfg_path, NULL, 0, &cfg, &err) != FSDPC_OK) {
      rc = fsdpc__data_fail(cmd, &err);
      goto out;
    }
    fsdpc__prepare_opts_from_config(cfg, &o);
  }
  for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
    const char *x = *(const char **)((char *)&cli + fields[f].off);
    if (x)
      *(const char **)((char *)&o + fields[f].off) = x;
  }
  if (format >= 0)
    o.format = format;
  if (cli.train_on >= 0)
    o.train_on = cli.train_on;
  if (cli.train_on_reasoning >= 0)
    o.train_on_reasoning = cli.train_on_reasoning;
  if (skip_bad >= 0)
    o.skip_bad = skip_bad;
  o.threads = cli.threads;
  o.dry_run = cli.dry_run;
  o.out = cli.out;
  o.show = cli.show >= 0 ? cli.show : (cli.dry_run ? 3 : 0);
  if (n_in > 0) {
    o.inputs = inputs;
    o.n_inputs = n_in;
  } else if (cfg && cfg->data.train[0]) {
    inputs[0] = cfg->data.train;
    o.inputs = inputs;
    o.n_inputs = 1;
  }
  if (o.n_inputs == 0 || (!o.out && !o.dry_run)) {
    fprintf(stderr, "fsdpc data prepare: --in FILE and --out FILE are required (see --help)\n");
    fsdpc__config_destroy(cfg);
    goto out;
  }
  fsdpc_prepare_stats st;
  if (fsdpc__prepare(&o, &st, &err) != FSDPC_OK) {
    rc = fsdpc__data_fail(cmd, &err);
    fsdpc__config_destroy(cfg);
    goto out;
  }
  double mb = (double)st.bytes_in / 1e6;
  printf("%s %lld examples (%s): %lld tokens, %lld targets (%.1f%%), from %.1f MB in %.2f s "
         "(%.1f MB/s, %.0f examples/s)%s%s\n",
         o.dry_run ? "checked" : "prepared", (long long)st.examples,
         fsdpc__prepare_format_name(st.format), (long long)st.tokens, (long long)st.target_tokens,
         st.tokens ? 100.0 * (double)st.target_tokens / (double)st.tokens : 0.0, mb, st.seconds,
         st.seconds > 0 ? mb / st.seconds : 0.0,
         st.seconds > 0 ? (double)st.examples / st.seconds : 0.0, o.dry_run ? "" : " -> ",
         o.dry_run ? "" : o.out);
  if (st.skipped)
    printf("skipped %lld bad example(s) of %lld lines; first: %s\n", (long long)st.skipped,
           (long long)st.lines, st.first_skip);
  if (st.weight_zero)
    printf("left out %lld example(s) of weight 0\n", (long long)st.weight_zero);
  fsdpc__config_destroy(cfg);
  rc = 0;
out:
  free(inputs);
  return rc;
}
