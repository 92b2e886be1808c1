/* gen_docs.c — the man page and the bash and zsh completions, written from
 * the verbs' option tables (`megaplan --generate man|bash|zsh`; meson runs
 * it at build time, so they never disagree with --help). */
#include <stdio.h>
#include <string.h>

#include "cli/verbs.h"
#include "megaplan_config.h"

/* ---- the man page ------------------------------------------------------------ */

/* Text as roff: a leading '.' or '\'' would be a request, '\' an escape,
 * '-' a hyphen where an option needs a minus. */
static void roff(FILE *out, const char *s)
{
    bool line_start = true;
    for (; *s; s++) {
        if (line_start && (*s == '.' || *s == '\''))
            fputs("\\&", out);
        line_start = false;
        if (*s == '\\')
            fputs("\\e", out);
        else if (*s == '-')
            fputs("\\-", out);
        else if (*s == '\n') {
            fputs("\n.br\n", out);
            line_start = true;
        } else
            fputc(*s, out);
    }
}

static void man_doc(FILE *out, const mp_verb_doc *d)
{
    const char *u = d->usage;
    while (*u) {
        size_t len = strcspn(u, "\n");
        fputs(".PP\n.B ", out);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)len, u);
        roff(out, line);
        fputs("\n", out);
        u += len + (u[len] == '\n');
    }
    if (d->text) {
        fputs(".PP\n", out);
        roff(out, d->text);
        fputs("\n", out);
    }
    for (const mp_opt_group *const *g = d->groups; g && *g; g++) {
        fputs(".PP\n.I ", out);
        roff(out, (*g)->title);
        fputs(":\n", out);
        for (size_t k = 0; k < (*g)->n; k++) {
            const mp_opt *o = &(*g)->opts[k];
            if (o->flags & MP_OPT_HIDDEN)
                continue;
            fputs(".TP\n.B ", out);
            roff(out, o->name);
            if (o->arg) {
                fputs(" \\fI", out);
                roff(out, o->arg);
                fputs("\\fR", out);
            }
            fputs("\n", out);
            roff(out, o->help);
            fputs("\n", out);
        }
    }
}

static void man_page(FILE *out)
{
    fprintf(out, ".\\\" megaplan.1, written by megaplan --generate man: edit src/cli, not this\n");
    fprintf(out, ".TH MEGAPLAN 1 \"\" \"megaplan %s\" \"User Commands\"\n", MEGAPLAN_VERSION);
    fputs(".SH NAME\nmegaplan \\- plan, simulate and execute Megatron\\-style parallel "
          "training\n",
          out);
    fputs(".SH SYNOPSIS\n.B megaplan\n.I verb\n[\\fIoptions\\fR]\n.br\n.B megaplan help\n"
          ".I verb\n",
          out);
    fputs(".SH DESCRIPTION\nmegaplan ranks tensor, sequence, pipeline, context, data and "
          "expert parallel splits of a transformer on a cluster, costs one split, simulates "
          "its iteration, and runs it on MPI ranks to check the numerics.\n",
          out);
    fputs(".SH VERBS\n", out);
    for (size_t i = 0; i < mp_n_verbs; i++) {
        fputs(".TP\n.B ", out);
        roff(out, mp_verbs[i].doc->name);
        fputs("\n", out);
        roff(out, mp_verbs[i].doc->summary);
        fputs("\n", out);
    }
    for (size_t i = 0; i < mp_n_verbs; i++) {
        const mp_verb *v = &mp_verbs[i];
        fputs(".SH \"MEGAPLAN ", out);
        for (const char *c = v->doc->name; *c; c++)
            fputc(*c >= 'a' && *c <= 'z' ? *c - 'a' + 'A' : *c, out);
        fputs("\"\n", out);
        man_doc(out, v->doc);
        if (v->mode) {
            fputs(".SS \"", out);
            roff(out, v->mode->summary);
            fputs("\"\n", out);
            man_doc(out, v->mode);
        }
    }
    fputs(".SH \"EXIT STATUS\"\n0 success; 1 failure, or nothing fits; 2 bad input (one line "
          "on stderr naming the file, line and field, or the option).\n",
          out);
    fputs(".SH FILES\nThe built-in hardware profiles and model presets are compiled in; "
          "copies of the profiles and the examples are installed under "
          "\\fIshare/megaplan\\fR.\n",
          out);
    fputs(".SH \"SEE ALSO\"\nThe documentation in docs/ of the source tree: docs/choosing.md, "
          "docs/formats.md, docs/simulator.md, docs/exec.md.\n",
          out);
}

/* ---- completions ----------------------------------------------------------------- */

/* The shown options of a verb and of its other mode, each name once (the
 * search over hardware shares --hw and --gpus with search), in table order.
 * Returns how many are in out. */
#define MAX_VERB_OPTIONS 256
static size_t verb_options(const mp_verb *v, const mp_opt *out[MAX_VERB_OPTIONS])
{
    size_t n = 0;
    const mp_verb_doc *docs[] = {v->doc, v->mode};
    for (size_t d = 0; d < 2; d++)
        for (const mp_opt_group *const *g = docs[d] ? docs[d]->groups : NULL; g && *g; g++)
            for (size_t k = 0; k < (*g)->n; k++) {
                const mp_opt *o = &(*g)->opts[k];
                bool dup = (o->flags & MP_OPT_HIDDEN) != 0;
                for (size_t s = 0; s < n && !dup; s++)
                    dup = !strcmp(out[s]->name, o->name);
                if (!dup && n < MAX_VERB_OPTIONS)
                    out[n++] = o;
            }
    return n;
}

static void bash_case(FILE *out, const mp_opt *o)
{
    /* a file, a name of megaplan's, a word from the row, or anything */
    if (o->values)
        fprintf(out, "        %s) words=\"%s\" ;;\n", o->name, o->values);
    else if (!strcmp(o->name, "--model"))
        fprintf(out, "        %s) words=\"$(megaplan models 2>/dev/null | awk 'NR>1{print $1}')\"; "
                     "files=1 ;;\n", o->name);
    else if (!strcmp(o->name, "--hw") || !strcmp(o->name, "--compare"))
        fprintf(out, "        %s) words=\"$(megaplan hw 2>/dev/null | awk 'NR>1{print $1}')\"; "
                     "files=1 ;;\n", o->name);
    else if (strstr(o->arg, "FILE"))
        fprintf(out, "        %s) files=1 ;;\n", o->name);
    else
        fprintf(out, "        %s) return 0 ;;\n", o->name);
}

static void bash_completion(FILE *out)
{
    fputs("# bash completion for megaplan, written by megaplan --generate bash\n"
          "_megaplan() {\n"
          "    local cur prev verb words=\"\" files=0\n"
          "    cur=${COMP_WORDS[COMP_CWORD]}\n"
          "    prev=${COMP_WORDS[COMP_CWORD-1]}\n"
          "    COMPREPLY=()\n"
          "    if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
          "        COMPREPLY=($(compgen -W \"",
          out);
    for (size_t i = 0; i < mp_n_verbs; i++)
        fprintf(out, "%s ", mp_verbs[i].doc->name);
    fputs("help --help --version\" -- \"$cur\"))\n"
          "        return 0\n"
          "    fi\n"
          "    verb=${COMP_WORDS[1]}\n"
          "    if [ \"$verb\" = help ]; then\n"
          "        [ \"$COMP_CWORD\" -eq 2 ] && COMPREPLY=($(compgen -W \"",
          out);
    for (size_t i = 0; i < mp_n_verbs; i++)
        fprintf(out, "%s%s", i ? " " : "", mp_verbs[i].doc->name);
    fputs("\" -- \"$cur\"))\n"
          "        return 0\n"
          "    fi\n"
          "    case \"$verb\" in\n",
          out);
    for (size_t i = 0; i < mp_n_verbs; i++) {
        const mp_verb *v = &mp_verbs[i];
        const mp_opt *opts[MAX_VERB_OPTIONS];
        size_t n = verb_options(v, opts);
        fprintf(out, "    %s)\n        case \"$prev\" in\n", v->doc->name);
        for (size_t k = 0; k < n; k++)
            if (opts[k]->arg)
                bash_case(out, opts[k]);
        fputs("        esac\n", out);
        fputs("        if [ -z \"$words\" ] && [ \"$files\" -eq 0 ]; then\n"
              "            case \"$cur\" in\n"
              "            -*) words=\"",
              out);
        for (size_t k = 0; k < n; k++)
            fprintf(out, "%s ", opts[k]->name);
        fputs("--help\" ;;\n", out);
        const char *operand = v->doc->operand;
        if (operand && !strcmp(operand, "model"))
            fputs("            *) words=\"$(megaplan models 2>/dev/null | awk 'NR>1{print $1}')\"; "
                  "files=1 ;;\n", out);
        else if (operand && !strcmp(operand, "profile"))
            fputs("            *) words=\"$(megaplan hw 2>/dev/null | awk 'NR>1{print $1}')\"; "
                  "files=1 ;;\n", out);
        else if (operand)
            fputs("            *) files=1 ;;\n", out);
        fputs("            esac\n        fi\n        ;;\n", out);
    }
    fputs("    esac\n"
          "    [ -n \"$words\" ] && COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
          "    [ \"$files\" -eq 1 ] && COMPREPLY+=($(compgen -f -- \"$cur\"))\n"
          "    return 0\n"
          "}\n"
          "complete -o filenames -F _megaplan megaplan\n",
          out);
}

/* zsh's _arguments spec of one option: '--name[help]:arg:action' */
static void zsh_help(FILE *out, const char *help)
{
    /* the first clause, without the characters _arguments reads */
    for (const char *c = help; *c && *c != '\n'; c++) {
        if (*c == ';' || (*c == ':' ) || (*c == '(' && c > help))
            break;
        if (*c == '[' || *c == ']' || *c == '\'' || *c == '\\' || *c == '`' || *c == '$')
            continue;
        fputc(*c, out);
    }
}

static void zsh_spec(FILE *out, const mp_opt *o)
{
    fprintf(out, "      '%s[", o->name);
    zsh_help(out, o->help);
    fputc(']', out);
    if (o->arg) {
        fputs(":", out);
        for (const char *c = o->arg; *c; c++)
            if (*c != ':' && *c != '\'' && *c != '[' && *c != ']')
                fputc(*c, out);
        if (o->values)
            fprintf(out, ":(%s)", o->values);
        else if (strstr(o->arg, "FILE") || !strcmp(o->name, "--model") || !strcmp(o->name, "--hw"))
            fputs(":_files", out);
        else
            fputs(": ", out);
    }
    fputs("' \\\n", out);
}

/* text inside a single-quoted zsh word */
static void zsh_quoted(FILE *out, const char *text)
{
    for (const char *c = text; *c; c++)
        if (*c == '\'')
            fputs("'\\''", out);
        else
            fputc(*c, out);
}

static void zsh_completion(FILE *out)
{
    fputs("#compdef megaplan\n"
          "# zsh completion for megaplan, written by megaplan --generate zsh\n"
          "_megaplan() {\n"
          "  local -a verbs\n"
          "  verbs=(\n",
          out);
    for (size_t i = 0; i < mp_n_verbs; i++)
    {
        fprintf(out, "    '%s:", mp_verbs[i].doc->name);
        zsh_quoted(out, mp_verbs[i].doc->summary);
        fputs("'\n", out);
    }
    fputs("    'help:the help of one verb'\n"
          "  )\n"
          "  if (( CURRENT == 2 )); then\n"
          "    _describe -t verbs 'megaplan verb' verbs\n"
          "    return\n"
          "  fi\n"
          "  local verb=$words[2]\n"
          "  shift words\n"
          "  (( CURRENT-- ))\n"
          "  case $verb in\n"
          "  help)\n"
          "    _describe -t verbs 'megaplan verb' verbs\n"
          "    ;;\n",
          out);
    for (size_t i = 0; i < mp_n_verbs; i++) {
        const mp_verb *v = &mp_verbs[i];
        fprintf(out, "  %s)\n    _arguments -s \\\n", v->doc->name);
        const mp_opt *opts[MAX_VERB_OPTIONS];
        size_t n = verb_options(v, opts);
        for (size_t k = 0; k < n; k++)
            zsh_spec(out, opts[k]);
        fputs("      '--help[this help]'", out);
        if (v->doc->operand)
            fputs(" \\\n      '*:file:_files'", out);
        fputs("\n    ;;\n", out);
    }
    fputs("  esac\n"
          "}\n"
          "_megaplan \"$@\"\n",
          out);
}

int mp_cli_generate(const char *what, FILE *out)
{
    if (!strcmp(what, "man"))
        man_page(out);
    else if (!strcmp(what, "bash"))
        bash_completion(out);
    else if (!strcmp(what, "zsh"))
        zsh_completion(out);
    else {
        fprintf(stderr, "megaplan --generate: '%.40s': expected man, bash or zsh\n", what);
        return 2;
    }
    return 0;
}
