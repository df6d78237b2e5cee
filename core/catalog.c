#include "catalog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "discover.h"

/* A skill found while scanning, before duplicates are settled. */
struct found {
	struct skill *skill;
	size_t source;
	size_t order; /* scan order, to keep the first of equal names */
};

struct found_list {
	struct found *items;
	size_t n, cap;
};

static int found_add(struct found_list *l, struct skill *s, size_t source)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct found *p = realloc(l->items, cap * sizeof *p);
		if (!p)
			return -1;
		l->items = p;
		l->cap = cap;
	}
	l->items[l->n] = (struct found){ s, source, l->n };
	l->n++;
	return 0;
}

/* Adds s (taken) to out, unless its name cannot be listed (a directory
 * name the skill fell back to): then it is dropped with a warning naming
 * its directory in src. Returns 0 or -1 on ENOMEM. */
static int found_add_listable(struct found_list *out, struct skill *s, size_t source,
			      const struct source *src, struct strlist *warnings)
{
	const char *why = skill_name_unusable(s->name);
	if (!why) {
		if (found_add(out, s, source) == 0)
			return 0;
		skill_unref(s);
		return -1;
	}
	char *q = skill_quote(s->dir_name);
	int rc = q ? strlist_addf(warnings, "skill directory %s in %s is not listed: its "
				  "name cannot be used (%s) and its front-matter gives no "
				  "usable name", q, src->path, why)
		   : -1;
	free(q);
	skill_unref(s);
	return rc;
}

static int cmp_found(const void *a, const void *b)
{
	const struct found *x = a, *y = b;
	int c = strcmp(x->skill->name, y->skill->name);
	if (c)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

static int cmp_entry_dir(const void *a, const void *b)
{
	const struct catalog_entry *x = *(const struct catalog_entry *const *)a;
	const struct catalog_entry *y = *(const struct catalog_entry *const *)b;
	return strcmp(x->skill->dir, y->skill->dir);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The previous catalogue's entries sorted by directory, for reuse. */
struct reuse_index {
	const struct catalog_entry **by_dir;
	size_t n;
};

static struct skill *reuse_lookup(const struct reuse_index *ri, const char *dir,
				  const struct stat *st, const struct strlist *dirty)
{
	if (!ri->n)
		return NULL;
	if (dirty && dirty->n &&
	    bsearch(&dir, dirty->items, dirty->n, sizeof(char *), cmp_str))
		return NULL;
	size_t lo = 0, hi = ri->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(dir, ri->by_dir[mid]->skill->dir);
		if (c == 0) {
			struct skill *s = ri->by_dir[mid]->skill;
			return skill_same_file(s, st) ? skill_ref(s) : NULL;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* The skill in dir, loaded or reused from the previous catalogue: 0 with
 * *out set (NULL when dir holds no SKILL.md: not a skill), or -1 on
 * ENOMEM. */
static int load_skill_dir(const char *dir, const struct reuse_index *ri,
			  const struct skill_limits *lim, const struct strlist *dirty,
			  struct skill **out)
{
	char path[PATH_MAX];
	struct stat st;
	*out = NULL;
	if (snprintf(path, sizeof path, "%s/SKILL.md", dir) >= (int)sizeof path)
		return 0;
	/* A SKILL.md that cannot be read, or that is a symbolic link (not
	 * followed), still makes a skill: an invalid one that says why,
	 * rather than a directory silently left out. */
	bool seen = lstat(path, &st) == 0;
	if (!seen && (errno == ENOENT || errno == ENOTDIR))
		return 0;
	if (seen && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
		return 0;
	struct skill *s = seen && S_ISREG(st.st_mode) ? reuse_lookup(ri, dir, &st, dirty) : NULL;
	if (!s)
		s = skill_load(dir, lim);
	if (!s)
		return -1;
	*out = s;
	return 0;
}

/* Loads the skills of one source's directories, several at once: loading
 * is reading and parsing files, independent per skill, and bound by system
 * calls, so a second core nearly halves a large catalogue's start. The
 * results keep the directories' (sorted) order. */
#define LOAD_THREADS_MAX 4
#define LOAD_PER_THREAD_MIN 64

struct load_job {
	const char *root;
	const struct strlist *names;
	const struct reuse_index *ri;
	const struct skill_limits *lim;
	const struct strlist *dirty;
	struct skill **skills; /* one per name, NULL: not a skill */
	size_t next;           /* the next name to load (atomic) */
	int failed;            /* ENOMEM somewhere (atomic) */
};

static void *load_worker(void *arg)
{
	struct load_job *j = arg;
	char path[PATH_MAX];
	struct stat st;
	for (;;) {
		size_t i = __atomic_fetch_add(&j->next, 1, __ATOMIC_RELAXED);
		if (i >= j->names->n)
			break;
		if (snprintf(path, sizeof path, "%s/%s", j->root, j->names->items[i]) >=
			    (int)sizeof path ||
		    stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		if (load_skill_dir(path, j->ri, j->lim, j->dirty, &j->skills[i]) < 0)
			__atomic_store_n(&j->failed, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static int load_all(struct load_job *j)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t want = j->names->n / LOAD_PER_THREAD_MIN;
	if (cpus > 0 && want > (size_t)cpus)
		want = (size_t)cpus;
	if (want > LOAD_THREADS_MAX)
		want = LOAD_THREADS_MAX;
	pthread_t t[LOAD_THREADS_MAX];
	size_t started = 0;
	/* This thread is one of the loaders; the others only help. */
	while (started + 1 < want && pthread_create(&t[started], NULL, load_worker, j) == 0)
		started++;
	load_worker(j);
	for (size_t i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	return j->failed ? -1 : 0;
}

/* The warning for a source that holds no skill: for a plain one, where
 * SKILL.md files lie deeper if they do (discover_hint). Returns 0 or -1
 * on ENOMEM. */
static int warn_no_skills(const struct source *src, struct strlist *warnings)
{
	if (src->recursive)
		return strlist_addf(warnings, "no skills in %s: no directory below it holds a "
				    "SKILL.md", src->path);
	char *hint;
	if (discover_hint(src->path, &hint) < 0)
		return -1;
	return strlist_add_owned(warnings, hint);
}

static int scan_source(const struct source *src, size_t source, const struct reuse_index *ri,
		       const struct skill_limits *lim, const struct strlist *dirty,
		       struct found_list *out, struct strlist *warnings)
{
	char path[PATH_MAX];
	struct stat st;
	if (snprintf(path, sizeof path, "%s/SKILL.md", src->path) < (int)sizeof path &&
	    lstat(path, &st) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) {
		/* A source that is one skill (a symbolic link: an invalid
		 * one, as in load_skill_dir). */
		struct skill *sk;
		if (load_skill_dir(src->path, ri, lim, dirty, &sk) < 0)
			return -1;
		return sk ? found_add_listable(out, sk, source, src, warnings) : 0;
	}

	DIR *d = opendir(src->path);
	if (!d)
		return strlist_addf(warnings, "source %s: %s", src->path, strerror(errno));
	struct strlist names = { 0 };
	int rc = 0;
	if (src->recursive) {
		/* Every directory holding a SKILL.md below the source, in
		 * search order (which settles duplicates). */
		closedir(d);
		static const struct discover_bounds deep = { DISCOVER_RECURSIVE_DEPTH,
							      DISCOVER_RECURSIVE_ENTRIES };
		struct discover found;
		if (discover_search(src->path, &deep, false, &found) < 0)
			return -1;
		names = found.skills;
		found.skills = (struct strlist){ 0 };
		if ((found.cut_depth &&
		     strlist_addf(warnings, "source %s: directories deeper than %u levels are not "
				  "searched for skills", src->path,
				  (unsigned)DISCOVER_RECURSIVE_DEPTH) < 0) ||
		    (found.cut_entries &&
		     strlist_addf(warnings, "source %s: the search for skills stopped after %u "
				  "directory entries; skills beyond them are not loaded (give the "
				  "directories that hold them as sources instead)", src->path,
				  (unsigned)DISCOVER_RECURSIVE_ENTRIES) < 0))
			rc = -1;
		discover_free(&found);
	} else {
		struct dirent *de;
		while ((de = readdir(d))) {
			if (de->d_name[0] == '.')
				continue;
			if (de->d_type != DT_DIR && de->d_type != DT_LNK && de->d_type != DT_UNKNOWN)
				continue;
			if (strlist_add(&names, de->d_name) < 0) {
				rc = -1;
				break;
			}
		}
		closedir(d);
		strlist_sort(&names);
	}
	struct load_job job = { .root = src->path, .names = &names, .ri = ri, .lim = lim,
				.dirty = dirty };
	if (rc == 0 && names.n && !(job.skills = calloc(names.n, sizeof *job.skills)))
		rc = -1;
	if (rc == 0 && names.n)
		rc = load_all(&job);
	size_t nskills = 0;
	for (size_t i = 0; job.skills && i < names.n; i++) {
		if (!job.skills[i])
			continue;
		nskills++;
		if (rc == 0)
			rc = found_add_listable(out, job.skills[i], source, src, warnings);
		else
			skill_unref(job.skills[i]);
	}
	free(job.skills);
	strlist_free(&names);
	if (rc == 0 && nskills == 0)
		rc = warn_no_skills(src, warnings);
	return rc;
}

bool catalog_same(const struct catalog *a, const struct catalog *b)
{
	if (a->n != b->n || !strlist_equal(&a->warnings, &b->warnings))
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (a->entries[i].skill != b->entries[i].skill ||
		    a->entries[i].source != b->entries[i].source)
			return false;
	return true;
}

long catalog_index(const struct catalog *cat, const char *name)
{
	size_t lo = 0, hi = cat ? cat->n : 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, cat->entries[mid].skill->name);
		if (c == 0)
			return (long)mid;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -1;
}

const struct catalog_entry *catalog_find(const struct catalog *cat, const char *name)
{
	long i = catalog_index(cat, name);
	return i < 0 ? NULL : &cat->entries[i];
}

/* Depth-first walk of front-matter sub-skill references from entry i,
 * collecting each reachable skill once and warning on cycles and missing
 * names. stack holds the current path (for cycle detection). */
static int resolve_refs(struct catalog *cat, size_t root, size_t i,
			size_t *stack, size_t depth, struct catalog_entry *e)
{
	const struct skill *s = cat->entries[i].skill;
	for (size_t k = 0; k < s->sub_skill_refs.n; k++) {
		const char *ref = s->sub_skill_refs.items[k];
		long j = catalog_index(cat, ref);
		if (j < 0) {
			if (i == root &&
			    strlist_addf(&e->warnings, "sub-skill '%s' not found", ref) < 0)
				return -1;
			continue;
		}
		bool on_stack = (size_t)j == root;
		for (size_t d = 0; d < depth && !on_stack; d++)
			on_stack = stack[d] == (size_t)j;
		if (on_stack) {
			if (strlist_addf(&e->warnings, "sub-skill cycle: '%s' -> '%s'",
					 s->name, ref) < 0)
				return -1;
			continue;
		}
		bool seen = false;
		for (size_t m = 0; m < e->nref_subs && !seen; m++)
			seen = e->ref_subs[m] == (size_t)j;
		if (seen)
			continue;
		size_t *p = realloc(e->ref_subs, (e->nref_subs + 1) * sizeof *p);
		if (!p)
			return -1;
		e->ref_subs = p;
		e->ref_subs[e->nref_subs++] = (size_t)j;
		cat->entries[j].is_referenced_sub = true;
		if (depth + 1 >= 64)
			continue; /* deeper chains are cut; they are still listed once */
		stack[depth] = (size_t)j;
		if (resolve_refs(cat, root, (size_t)j, stack, depth + 1, e) < 0)
			return -1;
	}
	return 0;
}

/* Whether source i of c is a directory an earlier source already names
 * (`s`, `./s` and `s/`, or a link to it): its skills would only shadow
 * themselves. */
static bool listed_before(const struct config *c, size_t i)
{
	struct stat a, b;
	if (stat(c->sources[i].path, &a) < 0)
		return false;
	for (size_t k = 0; k < i; k++)
		if (stat(c->sources[k].path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino)
			return true;
	return false;
}

struct catalog *catalog_build(const struct config *c, const struct catalog *prev,
			      const struct skill_limits *lim, const struct strlist *dirty)
{
	struct catalog *cat = calloc(1, sizeof *cat);
	struct found_list found = { 0 };
	struct reuse_index ri = { 0 };
	struct strlist dirty_sorted = { 0 };
	if (!cat)
		return NULL;
	if (dirty && (strlist_extend(&dirty_sorted, dirty) < 0))
		goto fail;
	strlist_sort(&dirty_sorted);
	if (prev && prev->n) {
		ri.by_dir = malloc(prev->n * sizeof *ri.by_dir);
		if (!ri.by_dir)
			goto fail;
		for (size_t i = 0; i < prev->n; i++)
			ri.by_dir[i] = &prev->entries[i];
		ri.n = prev->n;
		qsort(ri.by_dir, ri.n, sizeof *ri.by_dir, cmp_entry_dir);
	}
	for (size_t i = 0; i < c->nsources; i++) {
		if (listed_before(c, i)) {
			if (strlist_addf(&cat->warnings,
					 "source %s is the same directory as an earlier source; "
					 "it is read once", c->sources[i].path) < 0)
				goto fail;
			continue;
		}
		if (scan_source(&c->sources[i], i, &ri, lim, &dirty_sorted, &found,
				&cat->warnings) < 0)
			goto fail;
	}
	free(ri.by_dir);
	ri.by_dir = NULL;
	strlist_free(&dirty_sorted);

	if (found.n > 1)
		qsort(found.items, found.n, sizeof *found.items, cmp_found);
	cat->entries = calloc(found.n ? found.n : 1, sizeof *cat->entries);
	if (!cat->entries)
		goto fail;
	for (size_t i = 0; i < found.n; i++) {
		struct found *f = &found.items[i];
		if (cat->n && strcmp(cat->entries[cat->n - 1].skill->name, f->skill->name) == 0) {
			const struct catalog_entry *w = &cat->entries[cat->n - 1];
			if (strlist_addf(&cat->warnings,
					 "skill '%s' in %s is shadowed by the one in %s",
					 f->skill->name, f->skill->dir, w->skill->dir) < 0)
				goto fail;
			skill_unref(f->skill);
			f->skill = NULL;
			continue;
		}
		struct catalog_entry *e = &cat->entries[cat->n++];
		e->skill = f->skill;
		f->skill = NULL;
		e->source = f->source;
		e->trust = config_skill_trust(c, e->skill->name, c->sources[f->source].trust);
		e->disabled = config_skill_disabled(c, e->skill->name);
	}
	free(found.items);
	found.items = NULL;

	size_t stack[64];
	for (size_t i = 0; i < cat->n; i++)
		if (cat->entries[i].skill->sub_skill_refs.n &&
		    resolve_refs(cat, i, i, stack, 0, &cat->entries[i]) < 0)
			goto fail;
	return cat;
fail:
	for (size_t i = 0; i < found.n; i++)
		if (found.items[i].skill)
			skill_unref(found.items[i].skill);
	free(found.items);
	free(ri.by_dir);
	strlist_free(&dirty_sorted);
	catalog_free(cat);
	return NULL;
}

void catalog_free(struct catalog *cat)
{
	if (!cat)
		return;
	for (size_t i = 0; i < cat->n; i++) {
		skill_unref(cat->entries[i].skill);
		strlist_free(&cat->entries[i].warnings);
		free(cat->entries[i].ref_subs);
	}
	free(cat->entries);
	strlist_free(&cat->warnings);
	free(cat);
}
