/* mountopts: skillfs's own -o options taken out of a mount option string
 * (see mountopts.h). */
#include "mountopts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An option longer than this is refused (a path is at most PATH_MAX). */
#define MOUNTOPT_MAX 8192

bool mountopts_next(const char **p, char *tok, size_t size, bool *over)
{
	const char *s = *p;
	if (!s || !*s)
		return false;
	size_t len = 0;
	*over = false;
	for (; *s && *s != ','; s++) {
		char c = *s;
		if (s[0] == '\\' && s[1]) {
			s++;
			if (s[0] >= '0' && s[0] <= '3' && s[1] >= '0' && s[1] <= '7' && s[2] >= '0' &&
			    s[2] <= '7') {
				c = (char)((s[0] - '0') * 64 + (s[1] - '0') * 8 + (s[2] - '0'));
				s += 2;
			} else {
				c = *s;
			}
		}
		if (len < size - 1)
			tok[len++] = c;
		else
			*over = true;
	}
	tok[len] = '\0';
	*p = *s == ',' ? s + 1 : s;
	return true;
}

/* Whether mount(8) keeps option tok for itself (see mountopts.h). */
static bool mount_only(const char *tok)
{
	static const char *const names[] = { "nofail", "_netdev", "noauto", "auto", "defaults",
					     "user", "users", "nouser" };
	for (size_t i = 0; i < sizeof names / sizeof *names; i++)
		if (strcmp(tok, names[i]) == 0)
			return true;
	return strncmp(tok, "x-", 2) == 0 || strncmp(tok, "comment=", 8) == 0;
}

/* Appends tok to rest, escaped for libfuse (',' and '\'). */
static int add_rest(struct buf *rest, const char *tok)
{
	if (rest->len && buf_puts(rest, ",") < 0)
		return -1;
	for (const char *c = tok; *c; c++)
		if (((*c == ',' || *c == '\\') && buf_puts(rest, "\\") < 0) ||
		    buf_append(rest, c, 1) < 0)
			return -1;
	return 0;
}

/* Adds each directory of list (colon separated) to o. */
static int add_dirs(struct mountopts *o, const char *list, bool recursive)
{
	for (const char *s = list; *s;) {
		size_t n = strcspn(s, ":");
		if (n && (strlist_addf(&o->dirs, "%.*s", (int)n, s) < 0 ||
			  strlist_add(&o->recursive, recursive ? "1" : "0") < 0))
			return -1;
		s += n;
		if (*s == ':')
			s++;
	}
	return 0;
}

/* Sets *err to the message about option tok. Returns -1, or -2 when out of
 * memory. */
static int refuse(char **err, const char *fmt, const char *tok)
{
	if (asprintf(err, fmt, tok) < 0) {
		*err = NULL;
		return -2;
	}
	return -1;
}

int mountopts_parse(const char *opts, struct mountopts *o, char **err)
{
	memset(o, 0, sizeof *o);
	*err = NULL;
	char *tok = malloc(MOUNTOPT_MAX);
	if (!tok) {
		*err = strdup("out of memory");
		return -1;
	}
	const char *p = opts;
	bool over;
	int rc = 0;
	while (rc == 0 && mountopts_next(&p, tok, MOUNTOPT_MAX, &over)) {
		if (over) {
			rc = refuse(err, "mount option '%.40s...' is too long", tok);
		} else if (!strncmp(tok, "state=", 6) || !strncmp(tok, "skills=", 7) ||
			   !strncmp(tok, "recursive=", 10)) {
			const char *v = strchr(tok, '=') + 1;
			if (!*v) {
				rc = refuse(err, "mount option %s needs a value", tok);
			} else if (tok[1] == 't') {
				free(o->state);
				if (!(o->state = strdup(v)))
					rc = -2;
			} else if (add_dirs(o, v, tok[0] == 'r') < 0) {
				rc = -2;
			}
		} else if (*tok && !mount_only(tok) && add_rest(&o->rest, tok) < 0) {
			rc = -2;
		}
	}
	free(tok);
	if (rc == -2 && !*err)
		*err = strdup("out of memory");
	if (rc < 0) {
		mountopts_free(o);
		return -1;
	}
	return 0;
}

void mountopts_free(struct mountopts *o)
{
	free(o->state);
	o->state = NULL;
	strlist_free(&o->dirs);
	strlist_free(&o->recursive);
	buf_free(&o->rest);
}
