/* cmdline: a command string split into argv with plain quoting rules, no
 * shell (DESIGN.md D3).
 *
 * A bash call restricted to command patterns (Bash(git diff:*)) is
 * admitted by matching the argv this module makes against the pattern's
 * words, and the bash tool then executes exactly that argv directly
 * (execve, no shell, argv[0] looked up on the sandbox's PATH). The check
 * and the execution must use the same split of the same bytes, so a caller
 * splits once and uses the result for both.
 *
 * Rules:
 * - words are separated by unquoted blanks (space, tab);
 * - '...' is literal up to the next single quote;
 * - "..." is literal except that a backslash escapes one of " \ $ `
 *   (before any other character the backslash is kept), and an unescaped
 *   $ or ` in it is refused;
 * - outside quotes a backslash makes the next character literal;
 * - an unquoted ; | & < > ( ) $ ` * ? [ ] { } ~ # ! is refused: there is no
 *   shell to give it a meaning (quoted, it is an ordinary character);
 * - a line break (LF or CR), a NUL or another control character (tab
 *   aside) is refused anywhere, quoted or not;
 * - an unterminated quote, a trailing lone backslash, a command of no words
 *   and an empty first word are refused.
 * Nothing is expanded: no variables, globbing, tilde, history or command
 * substitution. Every command accepted splits into the same words that a
 * POSIX shell would make of it, with nothing expanded or redirected, so
 * the split does not depend on what finally executes it; that is why $ and
 * ` are refused inside double quotes, where a shell would expand them. */
#ifndef SKILLFS_CMDLINE_H
#define SKILLFS_CMDLINE_H

#include <stddef.h>

#include "strlist.h"

/* Splits the len bytes at cmd into words appended to argv (which must be
 * empty). On success returns 0; argv holds at least one word, the first
 * non-empty, and argv->items[argv->n] is NULL, so argv->items can be given
 * to execve as it is (until argv is changed); the caller frees argv with
 * strlist_free. On a refused command returns -1 with argv empty and *err a
 * message for the user (caller frees; err may be NULL), which names the
 * offending character and its byte (counting from 1). On allocation failure returns -1 with
 * argv empty, *err NULL and errno ENOMEM. Linear in len. */
int cmdline_splitn(const char *cmd, size_t len, struct strlist *argv, char **err);

/* cmdline_splitn over the NUL-terminated string cmd (a NULL cmd is refused
 * as empty). A caller holding a length (a JSON string may contain \u0000)
 * should use cmdline_splitn, which refuses the NUL instead of stopping at
 * it. */
int cmdline_split(const char *cmd, struct strlist *argv, char **err);

#endif
