/* cmdline: command strings split into argv without a shell (DESIGN.md D3). */
#include "cmdline.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

/* Characters a shell would give a meaning to; unquoted, they are refused. */
static const char shell_meta[] = ";|&<>()$`*?[]{}~#!";

#define NO_SHELL "commands run without a shell, so pipes, redirection, " \
	"variables, globbing and command substitution are not available"

/* Sets *err to a formatted message and returns -1; on ENOMEM *err is NULL
 * and errno ENOMEM. */
static int refuse(char **err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int refuse(char **err, const char *fmt, ...)
{
	va_list ap;
	char *m = NULL;
	va_start(ap, fmt);
	int n = vasprintf(&m, fmt, ap);
	va_end(ap);
	*err = n < 0 ? NULL : m;
	if (n < 0)
		errno = ENOMEM;
	return -1;
}

/* The first byte that no quoting makes acceptable: a line break, a NUL or
 * a control character other than tab. Returns len when there is none. */
static size_t first_forbidden(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((p[i] < 0x20 && p[i] != '\t') || p[i] == 0x7f)
			return i;
	return len;
}

static int refuse_forbidden(char **err, unsigned char c, size_t at)
{
	if (c == '\n' || c == '\r')
		return refuse(err, "contains a line break (byte %zu): " NO_SHELL
			      "; one command per call, and a line break is not "
			      "allowed even quoted", at + 1);
	if (c == '\0')
		return refuse(err, "contains a NUL character (byte %zu)", at + 1);
	return refuse(err, "contains the control character 0x%02x (byte %zu), "
		      "which is not allowed even quoted", c, at + 1);
}

/* Ends the current word: appends it to argv. */
static int push_word(struct strlist *argv, struct buf *w)
{
	char *s = buf_steal(w, NULL);
	return strlist_add_owned(argv, s);
}

/* Makes room for, and stores, a NULL after the last word. */
static int terminate(struct strlist *argv)
{
	if (argv->n == argv->cap) {
		char **p = realloc(argv->items, (argv->cap + 1) * sizeof *p);
		if (!p)
			return -1;
		argv->items = p;
		argv->cap++;
	}
	argv->items[argv->n] = NULL;
	return 0;
}

int cmdline_splitn(const char *cmd, size_t len, struct strlist *argv, char **err)
{
	char *dummy = NULL;
	if (!err)
		err = &dummy;
	*err = NULL;
	if (!cmd)
		len = 0;
	const unsigned char *p = (const unsigned char *)cmd;
	size_t bad = first_forbidden(p, len);

	struct buf w = {0};
	bool in_word = false;
	int rc = bad < len ? refuse_forbidden(err, p[bad], bad) : 0;
	size_t i = 0;
	while (i < len && rc == 0) {
		unsigned char c = p[i];
		if (c == ' ' || c == '\t') {
			if (in_word)
				rc = push_word(argv, &w) < 0 ? -1 : 0;
			in_word = false;
			i++;
			continue;
		}
		in_word = true; /* '' alone is a word, an empty one */
		if (c == '\'') {
			const unsigned char *end = memchr(p + i + 1, '\'', len - i - 1);
			if (!end) {
				rc = refuse(err, "unterminated single quote (opened at "
					    "byte %zu)", i + 1);
				break;
			}
			rc = buf_append(&w, p + i + 1, (size_t)(end - (p + i + 1)));
			i = (size_t)(end - p) + 1;
		} else if (c == '"') {
			size_t open = i++;
			for (;;) {
				if (i >= len) {
					rc = refuse(err, "unterminated double quote "
						    "(opened at byte %zu)", open + 1);
					break;
				}
				if (p[i] == '"') {
					i++;
					break;
				}
				if (p[i] == '$' || p[i] == '`') {
					rc = refuse(err, "contains shell syntax '%c' inside "
						    "double quotes (byte %zu): " NO_SHELL
						    "; write \\%c or use single quotes to "
						    "pass it literally", p[i], i + 1, p[i]);
					break;
				}
				if (p[i] == '\\' && i + 1 < len && strchr("\"\\$`", p[i + 1]))
					i++;
				if ((rc = buf_append(&w, p + i, 1)) < 0)
					break;
				i++;
			}
		} else if (c == '\\') {
			if (i + 1 >= len) {
				rc = refuse(err, "ends with a backslash that escapes "
					    "nothing (byte %zu)", i + 1);
				break;
			}
			rc = buf_append(&w, p + i + 1, 1);
			i += 2;
		} else if (strchr(shell_meta, c)) {
			rc = refuse(err, "contains shell syntax '%c' (byte %zu): "
				    NO_SHELL "; quote the character to pass it "
				    "literally", c, i + 1);
		} else {
			rc = buf_append(&w, p + i, 1);
			i++;
		}
	}
	if (rc == 0 && in_word)
		rc = push_word(argv, &w) < 0 ? -1 : 0;
	if (rc == 0 && argv->n == 0)
		rc = refuse(err, "the command is empty: it has no words");
	else if (rc == 0 && argv->items[0][0] == '\0')
		rc = refuse(err, "the command's first word (the program to run) "
			    "is empty");
	if (rc == 0)
		rc = terminate(argv);
	buf_free(&w);
	if (rc < 0) {
		strlist_free(argv);
		if (!*err)
			errno = ENOMEM;
	}
	if (err == &dummy)
		free(dummy);
	return rc;
}

int cmdline_split(const char *cmd, struct strlist *argv, char **err)
{
	return cmdline_splitn(cmd, cmd ? strlen(cmd) : 0, argv, err);
}
