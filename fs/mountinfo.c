/* mountinfo: this process's mount table (/proc/self/mountinfo), for
 * telling when the mount went away (see mountinfo.h). */
#include "mountinfo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Unescapes a mountinfo field in place (\040 is a space, and so on). */
static void mountinfo_unescape(char *s)
{
	char *o = s;
	for (char *p = s; *p; p++) {
		if (p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' && p[2] <= '7' &&
		    p[3] >= '0' && p[3] <= '7') {
			*o++ = (char)((p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0'));
			p += 3;
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
}

/* id > 0: whether mount id is in the table (1, or 0); id 0: the id of
 * the newest FUSE mount at dir, or 0. */
static long mountinfo_find(long id, const char *dir)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return id > 0 ? 1 : 0; /* cannot tell: assume it is there */
	char *line = NULL;
	size_t cap = 0;
	long found = 0;
	while (getline(&line, &cap, f) > 0) {
		long mid = strtol(line, NULL, 10);
		if (id > 0) {
			if (mid == id) {
				found = 1;
				break;
			}
			continue;
		}
		/* id parent major:minor root mountpoint options ... - fstype ... */
		char *save = NULL, *tok = strtok_r(line, " ", &save);
		for (int i = 0; tok && i < 4; i++)
			tok = strtok_r(NULL, " ", &save);
		if (!tok)
			continue;
		mountinfo_unescape(tok);
		if (strcmp(tok, dir) != 0)
			continue;
		char *sep = strstr(save ? save : "", " - ");
		if (sep && strncmp(sep + 3, "fuse", 4) == 0 && mid > found)
			found = mid;
	}
	free(line);
	fclose(f);
	return found;
}

long mountinfo_fuse_at(const char *dir)
{
	return dir ? mountinfo_find(0, dir) : 0;
}

bool mountinfo_has(long id)
{
	return id <= 0 || mountinfo_find(id, NULL) != 0;
}
