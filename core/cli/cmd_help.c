/* fsdpc help [CMD [SUB]] | --man, and fsdpc completion bash|zsh: the
 * manual page and the shell completions, written from the commands' own
 * help texts and option tables (so they cannot drift from the parser).
 * The build writes both into the build folder and `cmake --install`
 * installs them (core/CMakeLists.txt). */
#include <stdio.h>
#include <string.h>

#include "commands.h"

static const char help_help[] =
    "usage: fsdpc help [COMMAND [SUBCOMMAND]]\n"
    "       fsdpc help --man\n"
    "\n"
    "Prints a command's help (as `fsdpc COMMAND --help`), or with --man the manual\n"
    "page fsdpc(1) in roff, made from every command's help (man -l <(fsdpc help --man)).\n";

enum { O_MAN = 256 };
static const cli_opt help_opts[] = {{"man", O_MAN, NULL}, {0}};
const cli_cmd fsdpc__help_cmd = {"help", help_help, help_opts};

static const char completion_help[] =
    "usage: fsdpc completion bash|zsh|list\n"
    "\n"
    "Prints the shell completion script: commands, subcommands and each one's options.\n"
    "(list: one line per option, `COMMAND [SUBCOMMAND] --OPTION [VALUE]`, for scripts.)\n"
    "  bash:  source <(fsdpc completion bash)   (installed as\n"
    "         share/bash-completion/completions/fsdpc)\n"
    "  zsh:   fsdpc completion zsh > ~/.zfunc/_fsdpc   (installed as\n"
    "         share/zsh/site-functions/_fsdpc)\n";
static const cli_opt completion_opts[] = {{0}};
const cli_cmd fsdpc__completion_cmd = {"completion", completion_help, completion_opts};

/* Text as roff: a leading '.' or '\'' is escaped, '\' becomes \e. */
static void roff(const char *s) {
  int bol = 1;
  for (; *s; s++) {
    if (bol && (*s == '.' || *s == '\''))
      fputs("\\&", stdout);
    if (*s == '\\')
      fputs("\\e", stdout);
    else if (*s == '-')
      fputs("\\-", stdout);
    else
      putchar(*s);
    bol = *s == '\n';
  }
}

static void man_section(const char *title, const char *help) {
  printf(".SS \"%s\"\n.nf\n", title);
  roff(help);
  printf(".fi\n");
}

static int man_page(void) {
  const cli_command *cmds;
  int n = fsdpc__commands(&cmds);
  printf(".TH FSDPC 1 \"\" \"fsdpc %s\" \"User Commands\"\n", fsdpc_version());
  printf(".SH NAME\nfsdpc \\- fully sharded data\\-parallel training of decoder LLMs\n");
  printf(".SH SYNOPSIS\n.B fsdpc\n\\fICOMMAND\\fR [\\fIARGS\\fR]\n");
  printf(".SH DESCRIPTION\n.nf\n");
  char usage[4096] = "";
  FILE *f = fmemopen(usage, sizeof usage - 1, "w");
  if (f) {
    fsdpc__usage(f);
    fclose(f);
  }
  roff(usage);
  printf(".fi\n.SH COMMANDS\n");
  for (int i = 0; i < n; i++) {
    char title[128];
    if (cmds[i].cmd) {
      snprintf(title, sizeof title, "fsdpc %s", cmds[i].name);
      man_section(title, cmds[i].cmd->help);
      continue;
    }
    /* the subcommands share their command's help or have their own */
    const char *last = NULL;
    for (int j = 0; j < *cmds[i].n_subs; j++) {
      const cli_cmd *c = cmds[i].subs[j].cmd;
      if (!c || c->help == last)
        continue;
      snprintf(title, sizeof title, "fsdpc %s %s", cmds[i].name, cmds[i].subs[j].name);
      man_section(title, c->help);
      last = c->help;
    }
  }
  printf(".SH EXIT STATUS\n0 success (and \\-\\-help); 1 a failure, said in one line on stderr;\n"
         "2 a usage error (an unknown option or command, a bad or missing value).\n");
  printf(".SH OPTIONS\nEvery command takes \\fB\\-\\-opt value\\fR and \\fB\\-\\-opt=value\\fR, a "
         "unique prefix of a long option, and \\fB_\\fR for \\fB\\-\\fR in option names "
         "(torchrun's \\fB\\-\\-nproc_per_node\\fR); \\fB\\-\\-\\fR ends the options.\n");
  printf(".SH SEE ALSO\nThe docs/ folder of the fsdpc sources: docs/cli.md, docs/config.md, "
         "docs/api.md.\n");
  return 0;
}

static const cli_command *find(const char *name) {
  const cli_command *cmds;
  int n = fsdpc__commands(&cmds);
  for (int i = 0; i < n; i++)
    if (strcmp(cmds[i].name, name) == 0)
      return &cmds[i];
  return NULL;
}

/* Up to n positional words (and --man when man is non-NULL). */
typedef struct words_cli {
  const cli_cmd *cmd;
  const char *w[2];
  int n, max, man;
} words_cli;

static int words_arg(void *ctx, int id, const char *v) {
  words_cli *a = ctx;
  if (id == O_MAN)
    return (a->man = 1);
  if (a->n == a->max)
    return cli_usage_error(a->cmd, "unexpected argument '%s'", v) == 0;
  a->w[a->n++] = v;
  return 1;
}

int fsdpc__cmd_help(int argc, char **argv) {
  const cli_cmd *cmd = &fsdpc__help_cmd;
  words_cli a = {.cmd = cmd, .max = 2};
  int rc = cli_parse(cmd, argc, argv, words_arg, &a);
  const char **words = a.w;
  if (rc >= 0)
    return rc;
  if (a.man && words[0])
    return cli_usage_error(cmd, "--man prints the whole manual page: leave out '%s'", words[0]);
  if (a.man)
    return man_page();
  if (!words[0]) {
    fsdpc__usage(stdout);
    return 0;
  }
  const cli_command *k = find(words[0]);
  if (!k)
    return fsdpc__unknown_command("fsdpc help", words[0]);
  /* the command itself prints its help, subcommand or not */
  char help_arg[] = "--help";
  char *args[3] = {(char *)words[0], help_arg, NULL};
  if (words[1] && k->subs) {
    char *sub[4] = {(char *)words[0], (char *)words[1], help_arg, NULL};
    return k->run(3, sub);
  }
  return k->run(2, args);
}

/* The long options of a table, space separated. */
static void option_words(const cli_cmd *c) {
  for (const cli_opt *o = c ? c->opts : NULL; o && o->name; o++)
    printf(" --%s", o->name);
  printf(" --help");
}

/* An option's value names that are real values ("all|train|eval"), space
 * separated into buf; "" when the value is a placeholder ("N", "FILE"). A
 * short upper-case name is a placeholder ("N" of "N|all"). */
static const char *choices(const cli_opt *o, char *buf, size_t cap) {
  size_t k = 0;
  buf[0] = '\0';
  if (!o->arg || !strchr(o->arg, '|'))
    return buf;
  for (const char *p = o->arg; *p;) {
    size_t n = strcspn(p, "|"), up = 0;
    for (size_t i = 0; i < n; i++)
      up += p[i] >= 'A' && p[i] <= 'Z';
    if (!(n <= 3 && up == n) && k + n + 2 < cap) {
      memcpy(buf + k, p, n);
      k += n;
      buf[k++] = ' ';
      buf[k] = '\0';
    }
    p += n + (p[n] == '|');
  }
  return buf;
}

/* What differs between the two shells' scripts; the rest is one walk over
 * the command tables (script()). */
typedef struct dialect {
  const char *head;         /* up to the list of commands */
  const char *after_cmds;   /* after it, up to the per-command cases */
  const char *open, *close; /* a list: bash 'a b', zsh (a b) */
  const char *sub_case;     /* the case over the subcommand word */
  const char *tail;
} dialect;

static const dialect bash = {
    "# bash completion for fsdpc (written by `fsdpc completion bash`)\n"
    "_fsdpc() {\n"
    "  local cur=${COMP_WORDS[COMP_CWORD]} c1=${COMP_WORDS[1]} c2=${COMP_WORDS[2]}\n"
    "  local prev=${COMP_WORDS[COMP_CWORD-1]} opts='' subs='' vals=''\n"
    "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
    "    COMPREPLY=($(compgen -W '",
    "--help --version' -- \"$cur\"))\n    return\n  fi\n  case $c1 in\n",
    "'",
    "'",
    "$c2",
    "  esac\n"
    "  if [ -n \"$vals\" ]; then\n"
    "    COMPREPLY=($(compgen -W \"$vals\" -- \"$cur\"))\n"
    "  elif [ -n \"$subs\" ] && [ \"$COMP_CWORD\" -eq 2 ]; then\n"
    "    COMPREPLY=($(compgen -W \"$subs --help\" -- \"$cur\"))\n"
    "  elif [[ $cur == -* ]]; then\n"
    "    COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
    "  else\n"
    "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
    "  fi\n"
    "}\n"
    "complete -o filenames -F _fsdpc fsdpc\n",
};

static const dialect zsh = {
    "#compdef fsdpc\n"
    "# zsh completion for fsdpc (written by `fsdpc completion zsh`)\n"
    "_fsdpc() {\n"
    "  local -a opts subs vals\n"
    "  local prev=${words[CURRENT-1]}\n"
    "  if (( CURRENT == 2 )); then\n"
    "    compadd -- ",
    "--help --version\n    return\n  fi\n  case ${words[2]} in\n",
    "(",
    ")",
    "${words[3]}",
    "  esac\n"
    "  if (( ${#vals} )); then\n"
    "    compadd -- $vals\n"
    "  elif (( CURRENT == 3 && ${#subs} )); then\n"
    "    compadd -- $subs --help\n"
    "  elif [[ $PREFIX == -* ]]; then\n"
    "    compadd -- $opts\n"
    "  else\n"
    "    _files\n"
    "  fi\n"
    "}\n"
    "_fsdpc \"$@\"\n",
};

/* One command's (or subcommand's) branch: its options, and a case over the
 * previous word giving the values of the options with a fixed set. */
static void branch(const dialect *d, const char *indent, const char *name, const cli_cmd *c) {
  char buf[256];
  int any = 0;
  printf("%s%s) opts=%s", indent, name, d->open);
  option_words(c);
  printf("%s", d->close);
  for (const cli_opt *o = c ? c->opts : NULL; o && o->name; o++)
    if (*choices(o, buf, sizeof buf)) {
      printf("%s --%s) vals=%s%s%s ;;", any ? "" : "\n    case $prev in", o->name, d->open, buf,
             d->close);
      any = 1;
    }
  printf("%s ;;\n", any ? " esac" : "");
}

static void script(const dialect *d) {
  const cli_command *cmds;
  int n = fsdpc__commands(&cmds);
  printf("%s", d->head);
  for (int i = 0; i < n; i++)
    printf("%s ", cmds[i].name);
  printf("%s", d->after_cmds);
  for (int i = 0; i < n; i++) {
    if (cmds[i].cmd) {
      branch(d, "  ", cmds[i].name, cmds[i].cmd);
      continue;
    }
    printf("  %s)\n    subs=%s", cmds[i].name, d->open);
    for (int j = 0; j < *cmds[i].n_subs; j++)
      printf("%s ", cmds[i].subs[j].name);
    printf("%s\n    case %s in\n", d->close, d->sub_case);
    for (int j = 0; j < *cmds[i].n_subs; j++)
      branch(d, "    ", cmds[i].subs[j].name, cmds[i].subs[j].cmd);
    printf("    esac ;;\n");
  }
  printf("%s", d->tail);
}

static void option_lines(const char *path, const cli_cmd *c) {
  for (const cli_opt *o = c ? c->opts : NULL; o && o->name; o++)
    printf("%s --%s%s%s\n", path, o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}

static void list_options(void) {
  const cli_command *cmds;
  int n = fsdpc__commands(&cmds);
  for (int i = 0; i < n; i++) {
    if (cmds[i].cmd) {
      option_lines(cmds[i].name, cmds[i].cmd);
      continue;
    }
    for (int j = 0; j < *cmds[i].n_subs; j++) {
      char path[128];
      snprintf(path, sizeof path, "%s %s", cmds[i].name, cmds[i].subs[j].name);
      option_lines(path, cmds[i].subs[j].cmd);
    }
  }
}

int fsdpc__cmd_completion(int argc, char **argv) {
  static const char *const shells[] = {"bash", "zsh", "list"};
  const cli_cmd *cmd = &fsdpc__completion_cmd;
  words_cli a = {.cmd = cmd, .max = 1};
  int rc = cli_parse(cmd, argc, argv, words_arg, &a);
  const char *shell = a.w[0];
  if (rc >= 0)
    return rc;
  int which = shell ? cli_choice(cmd, "shell", shell, shells, 3) : -1;
  if (!shell)
    return cli_usage_error(cmd, "which shell? bash or zsh");
  if (which < 0)
    return 2;
  if (which < 2)
    script(which == 0 ? &bash : &zsh);
  else
    list_options();
  return 0;
}
