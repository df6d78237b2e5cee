/* watchlimit: the inotify watch limit and the directories it keeps
 * unwatched (see watchlimit.h). */
#include "watchlimit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the set of directories not watched ---- */

static uint64_t hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

/* A 64-bit mix of v into h (a splitmix64 step). */
static uint64_t mix(uint64_t h, uint64_t v)
{
	h += v + 0x9e3779b97f4a7c15ULL;
	h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
	h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
	return h ^ (h >> 31);
}

/* The slot of path in set's index: where it is, or the empty one it would
 * take. The index is never full (unwatched_get keeps it at most half so). */
static size_t unwatched_slot(const struct unwatched_set *set, const char *path)
{
	size_t mask = set->nindex - 1, i = hash_str(path) & mask;
	while (set->index[i] && strcmp(set->items[set->index[i] - 1].path, path) != 0)
		i = (i + 1) & mask;
	return i;
}

struct unwatched *unwatched_find(const struct unwatched_set *set, const char *path)
{
	if (!set->n)
		return NULL;
	size_t i = set->index[unwatched_slot(set, path)];
	return i ? &set->items[i - 1] : NULL;
}

/* Indexes set's items afresh, in an index of at least want slots. */
static int unwatched_reindex(struct unwatched_set *set, size_t want)
{
	size_t n = 16;
	while (n < want)
		n *= 2;
	size_t *index = calloc(n, sizeof *index);
	if (!index)
		return -1;
	free(set->index);
	set->index = index;
	set->nindex = n;
	for (size_t k = 0; k < set->n; k++)
		set->index[unwatched_slot(set, set->items[k].path)] = k + 1;
	return 0;
}

struct unwatched *unwatched_get(struct unwatched_set *set, const char *path)
{
	struct unwatched *u = unwatched_find(set, path);
	if (!u) {
		if ((set->n + 1) * 2 > set->nindex && unwatched_reindex(set, (set->n + 1) * 4) < 0)
			return NULL;
		if (set->n == set->cap) {
			size_t cap = set->cap ? set->cap * 2 : 64;
			struct unwatched *p = realloc(set->items, cap * sizeof *p);
			if (!p)
				return NULL;
			set->items = p;
			set->cap = cap;
		}
		char *copy = strdup(path);
		if (!copy)
			return NULL;
		u = &set->items[set->n];
		*u = (struct unwatched){ .path = copy };
		set->index[unwatched_slot(set, path)] = ++set->n;
	}
	u->drop = false;
	return u;
}

void unwatched_compact(struct unwatched_set *set)
{
	size_t k = 0;
	for (size_t i = 0; i < set->n; i++) {
		if (set->items[i].drop) {
			free(set->items[i].path);
			strlist_free(&set->items[i].names);
		} else {
			set->items[k++] = set->items[i];
		}
	}
	if (k == set->n)
		return;
	set->n = k;
	if (unwatched_reindex(set, set->n * 4) < 0) {
		/* out of memory: the index of the old size still has room */
		memset(set->index, 0, set->nindex * sizeof *set->index);
		for (size_t i = 0; i < set->n; i++)
			set->index[unwatched_slot(set, set->items[i].path)] = i + 1;
	}
}

void unwatched_free(struct unwatched_set *set)
{
	for (size_t i = 0; i < set->n; i++) {
		free(set->items[i].path);
		strlist_free(&set->items[i].names);
	}
	free(set->items);
	free(set->index);
	*set = (struct unwatched_set){ 0 };
}

/* ---- signatures ---- */

/* One entry's identity, kind, size and times. */
static uint64_t stat_signature(uint64_t h, const struct stat *st)
{
	h = mix(h, st->st_dev);
	h = mix(h, st->st_ino);
	h = mix(h, st->st_mode);
	h = mix(h, (uint64_t)st->st_size);
	h = mix(h, (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec);
	return mix(h, (uint64_t)st->st_ctim.tv_sec * 1000000000u + (uint64_t)st->st_ctim.tv_nsec);
}

uint64_t dir_signature(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return mix(0, (uint64_t)errno); /* gone, or not readable */
	uint64_t h = fstat(fd, &st) == 0 ? stat_signature(1, &st) : 1;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return h;
	}
	uint64_t sum = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		uint64_t e = hash_str(de->d_name);
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			e = stat_signature(e, &st);
		sum += mix(e, 0);
	}
	closedir(d);
	return mix(h, sum);
}

uint64_t paths_signature(const struct strlist *paths)
{
	uint64_t h = 2;
	struct stat st;
	for (size_t i = 0; i < paths->n; i++) {
		h = mix(h, hash_str(paths->items[i]));
		h = lstat(paths->items[i], &st) == 0 ? stat_signature(h, &st) : mix(h, 1);
		h = stat(paths->items[i], &st) == 0 ? stat_signature(h, &st) : mix(h, 1);
	}
	return h;
}

/* ---- the limit ---- */

/* The number in file path, or -1. */
static long read_long(const char *path)
{
	FILE *f = fopen(path, "re");
	long v = -1;
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* The inotify watches of the descriptors of process pid (a /proc name)
 * that are inotify instances: the "inotify wd:" lines of their fdinfo. */
static long process_watches(const char *pid)
{
	char path[600], link[64], line[256];
	snprintf(path, sizeof path, "/proc/%s/fd", pid);
	DIR *d = opendir(path);
	if (!d)
		return 0; /* not ours to look at, or gone */
	long n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		ssize_t len = readlinkat(dirfd(d), de->d_name, link, sizeof link - 1);
		if (len < 0)
			continue;
		link[len] = '\0';
		if (strcmp(link, "anon_inode:inotify") != 0)
			continue;
		snprintf(path, sizeof path, "/proc/%s/fdinfo/%s", pid, de->d_name);
		FILE *f = fopen(path, "re");
		while (f && fgets(line, sizeof line, f))
			n += strncmp(line, "inotify wd:", 11) == 0;
		if (f)
			fclose(f);
	}
	closedir(d);
	return n;
}

void watch_limit_read(struct watch_limit *out)
{
	/* Since Linux 5.11 the first is the second of the first user
	 * namespace; in another, the second is that namespace's own, and
	 * both apply. */
	long fs = read_long("/proc/sys/fs/inotify/max_user_watches");
	long user = read_long("/proc/sys/user/max_inotify_watches");
	out->limit = fs;
	out->sysctl = "fs.inotify.max_user_watches";
	if (user >= 0 && (fs < 0 || user < fs)) {
		out->limit = user;
		out->sysctl = "user.max_inotify_watches";
	}
	out->in_use = -1;
	DIR *d = opendir("/proc");
	if (!d)
		return;
	out->in_use = 0;
	uid_t uid = getuid();
	struct dirent *de;
	struct stat st;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, 0) == 0 && st.st_uid == uid)
			out->in_use += process_watches(de->d_name);
	}
	closedir(d);
}
