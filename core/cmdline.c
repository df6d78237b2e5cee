#include "cmdline.h"

#include <stdlib.h>
#include <string.h>

/* Placeholder: words separated by blanks, nothing else. */
int cmdline_split(const char *cmd, struct strlist *argv, char **err)
{
	*err = NULL;
	memset(argv, 0, sizeof *argv);
	for (const char *s = cmd; *s;) {
		s += strspn(s, " \t");
		size_t n = strcspn(s, " \t");
		if (n && strlist_addf(argv, "%.*s", (int)n, s) < 0)
			return -1;
		s += n;
	}
	if (argv->n == 0) {
		*err = strdup("empty command");
		return -1;
	}
	return 0;
}
