/* mountinfo: this process's mount table (/proc/self/mountinfo), for
 * telling when the mount went away (see mountinfo.h). */
#include "mountinfo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strlist.h"

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

/* Each line of the table, split: its id, mount point (unescaped) and
 * file system type; fn returns nonzero to stop. Returns -1 when the table
 * cannot be read, else 0. */
static int mountinfo_each(int (*fn)(void *ctx, long id, const char *dir, const char *type),
			  void *ctx)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -1;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		long mid = strtol(line, NULL, 10);
		/* id parent major:minor root mountpoint options ... - fstype ... */
		char *save = NULL, *tok = strtok_r(line, " ", &save);
		for (int i = 0; tok && i < 4; i++)
			tok = strtok_r(NULL, " ", &save);
		if (!tok)
			continue;
		mountinfo_unescape(tok);
		char *sep = strstr(save ? save : "", " - ");
		char type[64] = "";
		if (sep)
			sscanf(sep + 3, "%63s", type);
		if (fn(ctx, mid, tok, type))
			break;
	}
	free(line);
	fclose(f);
	return 0;
}

struct find {
	long id;         /* > 0: look for this id */
	const char *dir; /* else: the newest FUSE mount at dir */
	long found;
};

static int find_one(void *ctx, long id, const char *dir, const char *type)
{
	struct find *q = ctx;
	if (q->id > 0) {
		if (id == q->id)
			q->found = 1;
		return q->found != 0;
	}
	if (strcmp(dir, q->dir) == 0 && strncmp(type, "fuse", 4) == 0 && id > q->found)
		q->found = id;
	return 0;
}

long mountinfo_fuse_at(const char *dir)
{
	struct find q = { 0, dir, 0 };
	if (!dir || mountinfo_each(find_one, &q) < 0)
		return 0;
	return q.found;
}

bool mountinfo_has(long id)
{
	struct find q = { id, NULL, 0 };
	if (id <= 0 || mountinfo_each(find_one, &q) < 0)
		return true; /* cannot tell: assume it is there */
	return q.found != 0;
}

struct collect {
	struct strlist *out;
	bool oom;
};

static int add_skillfs(void *ctx, long id, const char *dir, const char *type)
{
	(void)id;
	struct collect *c = ctx;
	if (strcmp(type, "fuse.skillfs") == 0 && strlist_add(c->out, dir) < 0) {
		c->oom = true;
		return 1;
	}
	return 0;
}

int mountinfo_skillfs_mounts(struct strlist *out)
{
	struct collect c = { out, false };
	if (mountinfo_each(add_skillfs, &c) < 0 || c.oom)
		return -1;
	return 0;
}
