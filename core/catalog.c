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
#include "grow.h"

/* A skill found while scanning, before duplicates are settled. */
struct found {
	struct skill *skill;
	struct skill_scan *scan; /* its files (may be NULL) */
	size_t source;
	size_t order; /* scan order, to keep the first of equal names */
};

struct found_list {
	struct found *items;
	size_t n, cap;
};

static int found_add(struct found_list *l, struct skill *s, struct skill_scan *scan,
		     size_t source)
{
	struct found *p = grow(l->items, &l->cap, l->n, sizeof *p, 64);
	if (!p)
		return -1;
	l->items = p;
	l->items[l->n] = (struct found){ s, scan, source, l->n };
	l->n++;
	return 0;
}

/* Adds s and its scan (both taken) to out, unless its name cannot be
 * listed (a directory name the skill fell back to): then it is dropped
 * with a warning naming its directory in src. Returns 0 or -1 on ENOMEM. */
static int found_add_listable(struct found_list *out, struct skill *s, struct skill_scan *scan,
			      size_t source, const struct source *src, struct strlist *warnings)
{
	const char *why = skill_name_unusable(s->name);
	if (!why) {
		if (found_add(out, s, scan, source) == 0)
			return 0;
		skill_unref(s);
		scan_unref(scan);
		return -1;
	}
	char *q = skill_quote(s->dir_name);
	int rc = q ? strlist_addf(warnings, "skill directory %s in %s is not listed: its "
				  "name cannot be used (%s) and its front-matter gives no "
				  "usable name", q, src->path, why)
		   : -1;
	free(q);
	skill_unref(s);
	scan_unref(scan);
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

const struct skill *catalog_entry_loaded(const struct catalog_entry *e)
{
	return e->loaded ? e->loaded : e->skill;
}

/* The directory of entry e's skill ("" when it has none). */
static const char *entry_dir(const struct catalog_entry *e)
{
	const char *d = catalog_entry_loaded(e)->dir;
	return d ? d : "";
}

static int cmp_entry_dir(const void *a, const void *b)
{
	const struct catalog_entry *x = *(const struct catalog_entry *const *)a;
	const struct catalog_entry *y = *(const struct catalog_entry *const *)b;
	return strcmp(entry_dir(x), entry_dir(y));
}

/* The previous catalogue's entries sorted by directory, for reuse. */
struct reuse_index {
	const struct catalog_entry **by_dir;
	size_t n;
};

/* The previous catalogue's entry of the skill in dir, or NULL. */
static const struct catalog_entry *reuse_entry(const struct reuse_index *ri, const char *dir)
{
	size_t lo = 0, hi = ri->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(dir, entry_dir(ri->by_dir[mid]));
		if (c == 0)
			return ri->by_dir[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* The skill the previous entry pe loaded from dir, when its SKILL.md is
 * still st and dir had no other change (a reference), else NULL. */
static struct skill *reuse_lookup(const struct catalog_entry *pe, const char *dir,
				  const struct stat *st, const struct strlist *dirty)
{
	if (!pe || (dirty && strlist_sorted_has(dirty, dir)))
		return NULL;
	struct skill *s = pe->loaded ? pe->loaded : pe->skill;
	return skill_same_file(s, st) ? skill_ref(s) : NULL;
}

/* How the skills of a build are loaded. */
struct load_ctx {
	const struct reuse_index *ri;   /* the previous catalogue's entries */
	const struct skill_limits *lim;
	const struct strlist *dirty;    /* sorted: directories read again */
	const struct findings_rules *rules;
	bool check_files;               /* a skill reused is reused only when
	                                   its files are as its scan found them */
};

/* Whether the skill s reused with its scan prev (of directory dir) still
 * has the files prev found: each looked at again (scan_dir, which reads
 * only a file whose identity changed). 1 yes, 0 no, -1 on ENOMEM. */
static int files_unchanged(const char *dir, const struct skill_scan *prev,
			   const struct findings_rules *rules)
{
	struct skill_scan *now = scan_dir(dir, prev, rules, NULL);
	if (!now)
		return -1;
	int same = scan_unchanged(now, prev);
	scan_unref(now);
	return same;
}

/* The skill in dir, loaded or reused from the previous catalogue, with the
 * scan of its files (reused with it, else made anew, reusing what is
 * unchanged): 0 with *out and *scan set (both NULL when dir holds no
 * SKILL.md: not a skill), or -1 on ENOMEM. */
static int load_skill_dir(const char *dir, const struct load_ctx *lc, struct skill **out,
			  struct skill_scan **scan)
{
	char path[PATH_MAX];
	struct stat st;
	*out = NULL;
	*scan = NULL;
	if (snprintf(path, sizeof path, "%s/SKILL.md", dir) >= (int)sizeof path)
		return 0;
	/* A skill not seen before: its directory's entries, read once, say
	 * whether SKILL.md is there and what it is, and whether there is a
	 * skills/ to look in; the scan takes them too. (A directory that
	 * cannot be listed whole, or an entry of unknown type: lstat.) */
	const struct catalog_entry *pe = lc->ri->n ? reuse_entry(lc->ri, dir) : NULL;
	struct scan_listing top = {0};
	if (!pe && scan_listing_read(dir, &top) < 0)
		return -1;
	bool listed = !pe && scan_listing_whole(&top);
	const struct scan_entry *me = listed ? scan_listing_find(&top, "SKILL.md") : NULL;
	/* A SKILL.md that cannot be read, or that is a symbolic link (not
	 * followed), still makes a skill: an invalid one that says why,
	 * rather than a directory silently left out. */
	bool seen = true;
	if (listed && (!me || me->type != DT_UNKNOWN))
		st.st_mode = me ? DTTOIF(me->type) : 0;
	else
		seen = lstat(path, &st) == 0;
	if ((listed && !me) || (!seen && (errno == ENOENT || errno == ENOTDIR)) ||
	    (seen && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))) {
		scan_listing_free(&top);
		return 0;
	}
	struct skill *s = seen && S_ISREG(st.st_mode) ? reuse_lookup(pe, dir, &st, lc->dirty)
						      : NULL;
	if (s && pe->scan && lc->check_files) {
		int same = files_unchanged(dir, pe->scan, lc->rules);
		if (same != 1) { /* a file changed: the skill is loaded afresh */
			skill_unref(s);
			s = NULL;
		}
		if (same < 0) {
			scan_listing_free(&top);
			return -1;
		}
	}
	/* SKILL.md is read once: the scan takes the bytes the load parsed. */
	struct skill_md md = {0};
	if (s && pe->scan)
		*scan = scan_ref(pe->scan);
	else if (!s)
		s = skill_load_md(dir, lc->lim, !listed || scan_listing_find(&top, "skills"), &md);
	if (s && !*scan) {
		struct scan_given given = { "SKILL.md", md.st, md.text, md.len, listed ? &top : NULL };
		*scan = scan_dir(dir, pe ? pe->scan : NULL, lc->rules,
				 md.have_st || listed ? &given : NULL);
	}
	scan_listing_free(&top);
	skill_md_free(&md);
	if (!s || !*scan) {
		skill_unref(s);
		return -1;
	}
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
	const unsigned char *types; /* per name: its d_type, or NULL: unknown */
	const struct load_ctx *lc;
	struct skill **skills; /* one per name, NULL: not a skill */
	struct skill_scan **scans; /* one per name, with its skill */
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
		/* A directory as readdir said needs no stat; a link or an
		 * entry of unknown type is followed to see what it is. */
		if (snprintf(path, sizeof path, "%s/%s", j->root, j->names->items[i]) >=
			    (int)sizeof path ||
		    ((!j->types || j->types[i] != DT_DIR) &&
		     (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))))
			continue;
		if (load_skill_dir(path, j->lc, &j->skills[i], &j->scans[i]) < 0)
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

/* What a catalogue build shares with each source's scan. */
struct build {
	const struct config *c;
	const struct catalog *prev;
	struct load_ctx load;
	const struct pin_history *hist;
	struct catalog *cat;
	struct found_list *found;
	size_t blockers; /* what catalog_update cannot follow (updatable) */
};

/* For a pinned source: its pin's state (cat->pins[si]) from its skills,
 * each named by its directory relative to the source (names; NULL: the
 * source is the one skill). */
static int check_pin(struct build *b, size_t si, const struct strlist *names,
		     struct skill_scan *const *scans, struct skill *const *skills, size_t n)
{
	const struct source *src = &b->c->sources[si];
	if (!src->fingerprint)
		return 0;
	struct pin_part *parts = calloc(n ? n : 1, sizeof *parts);
	if (!parts)
		return -1;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (skills[i])
			parts[k++] = (struct pin_part){ scans[i], names ? names->items[i] : "" };
	struct source_pin *prev = b->prev && si < b->prev->npins ? b->prev->pins[si] : NULL;
	b->cat->pins[si] = pin_check(src, si, parts, k, prev, b->hist);
	free(parts);
	if (!b->cat->pins[si])
		return -1;
	if (!b->cat->pins[si]->matched &&
	    strlist_add(&b->cat->warnings, b->cat->pins[si]->message) < 0)
		return -1;
	return 0;
}

/* A directory entry's name and type (d_type), as a source lists it. */
struct typed_name {
	char *name;
	unsigned char type;
};

static int cmp_typed_name(const void *a, const void *b)
{
	return strcmp(((const struct typed_name *)a)->name, ((const struct typed_name *)b)->name);
}

static int scan_source(struct build *b, size_t source)
{
	const struct source *src = &b->c->sources[source];
	struct found_list *out = b->found;
	struct strlist *warnings = &b->cat->warnings;
	char path[PATH_MAX];
	struct stat st;
	if (snprintf(path, sizeof path, "%s/SKILL.md", src->path) < (int)sizeof path &&
	    lstat(path, &st) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) {
		/* A source that is one skill (a symbolic link: an invalid
		 * one, as in load_skill_dir). */
		struct skill *sk;
		struct skill_scan *scan;
		if (load_skill_dir(src->path, &b->load, &sk, &scan) < 0)
			return -1;
		b->blockers++;
		if (sk && check_pin(b, source, NULL, &scan, &sk, 1) < 0) {
			skill_unref(sk);
			scan_unref(scan);
			return -1;
		}
		return sk ? found_add_listable(out, sk, scan, source, src, warnings) : 0;
	}

	DIR *d = opendir(src->path);
	if (!d) {
		/* A pinned source that cannot be read holds no skill to fail;
		 * its warning says why. */
		b->blockers++;
		return strlist_addf(warnings, "source %s: %s", src->path, strerror(errno));
	}
	struct strlist names = { 0 };
	unsigned char *types = NULL; /* plain: each name's d_type */
	struct typed_name *listed = NULL;
	size_t nlisted = 0, cap = 0;
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
			struct typed_name *p = grow(listed, &cap, nlisted, sizeof *p, 64);
			if (!p || !(p[nlisted].name = strdup(de->d_name))) {
				rc = -1;
				break;
			}
			listed = p;
			listed[nlisted++].type = de->d_type;
		}
		closedir(d);
		if (nlisted > 1)
			qsort(listed, nlisted, sizeof *listed, cmp_typed_name);
		if (rc == 0 && nlisted && !(types = malloc(nlisted)))
			rc = -1;
		for (size_t i = 0; i < nlisted; i++) {
			if (rc < 0)
				free(listed[i].name);
			else if (strlist_add_owned(&names, listed[i].name) == 0)
				types[i] = listed[i].type;
			else
				rc = -1;
		}
		free(listed);
	}
	struct load_job job = { .root = src->path, .names = &names, .types = types,
				.lc = &b->load };
	if (rc == 0 && names.n && (!(job.skills = calloc(names.n, sizeof *job.skills)) ||
				   !(job.scans = calloc(names.n, sizeof *job.scans))))
		rc = -1;
	if (rc == 0 && names.n)
		rc = load_all(&job);
	/* Every skill found in the source counts for its pin, also one
	 * left out below for its name. */
	if (rc == 0)
		rc = check_pin(b, source, &names, job.scans, job.skills, names.n);
	size_t nskills = 0;
	for (size_t i = 0; job.skills && i < names.n; i++) {
		if (!job.skills[i])
			continue;
		nskills++;
		if (rc == 0) {
			b->blockers += skill_name_unusable(job.skills[i]->name) != NULL;
			rc = found_add_listable(out, job.skills[i], job.scans[i], source, src,
						warnings);
		} else {
			skill_unref(job.skills[i]);
			scan_unref(job.scans[i]);
		}
	}
	free(job.skills);
	free(job.scans);
	free(types);
	strlist_free(&names);
	if (rc == 0 && nskills == 0) {
		b->blockers++;
		rc = warn_no_skills(src, warnings);
	}
	return rc;
}

bool catalog_same(const struct catalog *a, const struct catalog *b)
{
	if (a->n != b->n || !strlist_equal(&a->warnings, &b->warnings))
		return false;
	if (b->delta.base == a)
		return b->delta.names.n == 0;
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

/* Resolves every entry's sub-skill references (resolve_refs), from
 * scratch: ref_subs, is_referenced_sub and the warnings after ngate. */
static int resolve_all_refs(struct catalog *cat)
{
	size_t stack[64];
	for (size_t i = 0; i < cat->n; i++)
		if (cat->entries[i].skill->sub_skill_refs.n &&
		    resolve_refs(cat, i, i, stack, 0, &cat->entries[i]) < 0)
			return -1;
	return 0;
}

/* Whether e's skill is named otherwise than its directory. */
static bool entry_renamed(const struct catalog_entry *e)
{
	const char *d = entry_dir(e), *slash = strrchr(d, '/');
	return strcmp(slash ? slash + 1 : d, e->skill->name) != 0;
}

/* Lists the entries named otherwise than their directory (cat->renamed):
 * for an update of prev (from: the prev index of each entry, SIZE_MAX for
 * one loaded again), prev's that stay are taken from prev's list, and only
 * the new ones looked at; with no prev, every entry is. */
static int list_renamed(struct catalog *cat, const struct catalog *prev, const size_t *from)
{
	size_t cap = 0, r = 0;
	cat->nrenamed = 0;
	for (size_t i = 0; i < cat->n; i++) {
		bool kept = prev && from[i] != SIZE_MAX, was = false;
		/* from ascends over the entries that stay: follow prev's list */
		while (kept && r < prev->nrenamed && prev->renamed[r] < from[i])
			r++;
		if (kept)
			was = r < prev->nrenamed && prev->renamed[r] == from[i];
		else
			was = entry_renamed(&cat->entries[i]);
		if (!was)
			continue;
		size_t *p = grow(cat->renamed, &cap, cat->nrenamed, sizeof *p, 16);
		if (!p)
			return -1;
		cat->renamed = p;
		cat->renamed[cat->nrenamed++] = i;
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

/* At most this many findings of a skill are repeated in its warnings. */
#define FINDING_WARNINGS_MAX 5

/* The warnings for e's findings (and unread files) other than the one
 * that makes it invalid. */
static int finding_warnings(struct catalog_entry *e, bool acknowledged)
{
	const struct skill_scan *sc = e->scan;
	size_t shown = 0, left = 0;
	int rc = sc && sc->error ? strlist_addf(&e->warnings, "its files could not all be read "
						 "(digest and findings leave them out): %s",
						 sc->error)
				 : 0;
	for (size_t i = 0; sc && i < sc->n && rc == 0; i++) {
		const struct scan_file *f = &sc->files[i];
		left += f->more;
		for (size_t k = 0; k < f->nfindings && rc == 0; k++) {
			unsigned r = f->findings[k].rule;
			bool high = findings_rule_level(r) == FINDING_HIGH;
			if (high && !acknowledged)
				continue; /* the skill's error says it */
			if (shown == FINDING_WARNINGS_MAX) {
				left++;
				continue;
			}
			shown++;
			rc = strlist_addf(&e->warnings, "injection finding (%s%s): %s:%u: %s: %s",
					  high ? "high" : "low", high ? ", acknowledged" : "", f->path,
					  f->findings[k].line, findings_rule_id(r),
					  findings_rule_reason(r));
		}
	}
	if (rc == 0 && left)
		rc = strlist_addf(&e->warnings, "%zu more injection findings: see skills/%s/findings",
				  left, e->skill->name);
	return rc;
}

/* Serves e's skill invalid (an invalid copy, reused from the previous
 * catalogue when it was made for the same reason) while its pinned source
 * does not match or its files hold a high finding not acknowledged, and
 * adds the findings' warnings. */
static int gate_entry(struct build *b, struct catalog_entry *e)
{
	const char *name = e->skill->name;
	const struct source_pin *pin = e->source < b->cat->npins ? b->cat->pins[e->source] : NULL;
	bool ack = config_skill_acknowledged(b->c, name);
	char first[512];
	char *why = NULL;
	if (finding_warnings(e, ack) < 0)
		return -1;
	if (pin && !pin->matched) {
		why = strdup(pin->message);
	} else if (e->scan && e->scan->nhigh && !ack && scan_first_high(e->scan, first, sizeof first)) {
		if (asprintf(&why, "injection finding (high): %s; the skill is invalid until "
			     "skills.acknowledged names it (every finding: skills/%s/findings)",
			     first, name) < 0)
			why = NULL;
	} else {
		return 0;
	}
	if (!why)
		return -1;
	const struct reuse_index *ri = b->load.ri;
	const struct catalog_entry *pe = ri->n ? reuse_entry(ri, entry_dir(e)) : NULL;
	struct skill *copy = NULL;
	if (pe && pe->loaded == e->skill && pe->skill != pe->loaded && pe->skill->error &&
	    strcmp(pe->skill->error, why) == 0)
		copy = skill_ref(pe->skill);
	else
		copy = skill_invalid_copy(e->skill, why);
	free(why);
	if (!copy)
		return -1;
	e->loaded = e->skill;
	e->skill = copy;
	return 0;
}

struct catalog *catalog_build(const struct config *c, const struct catalog *prev,
			      const struct skill_limits *lim, const struct strlist *dirty)
{
	return catalog_build_with(c, prev, lim, dirty, NULL);
}

/* catalog_build_with; check_files: catalog_build_checked. */
static struct catalog *build(const struct config *c, const struct catalog *prev,
			     const struct skill_limits *lim, const struct strlist *dirty,
			     const struct pin_history *hist, bool check_files)
{
	struct catalog *cat = calloc(1, sizeof *cat);
	struct found_list found = { 0 };
	struct reuse_index ri = { 0 };
	struct strlist dirty_sorted = { 0 };
	char *rerr = NULL;
	struct findings_rules *rules = NULL;
	if (!cat)
		return NULL;
	struct build b = { c, prev, { &ri, lim, &dirty_sorted, NULL, check_files }, hist, cat,
			   &found, 0 };
	if (dirty && (strlist_extend(&dirty_sorted, dirty) < 0))
		goto fail;
	strlist_sort(&dirty_sorted);
	/* Compiled once per build, for the skills that are (re)loaded. */
	if (!(b.load.rules = rules = findings_rules_new(&rerr)))
		goto fail;
	cat->pins = calloc(c->nsources ? c->nsources : 1, sizeof *cat->pins);
	if (!cat->pins)
		goto fail;
	cat->npins = c->nsources;
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
			b.blockers++;
			if (strlist_addf(&cat->warnings,
					 "source %s is the same directory as an earlier source; "
					 "it is read once", c->sources[i].path) < 0)
				goto fail;
			continue;
		}
		if (scan_source(&b, i) < 0)
			goto fail;
	}
	strlist_free(&dirty_sorted);
	findings_rules_free(rules);
	rules = NULL;

	if (found.n > 1)
		qsort(found.items, found.n, sizeof *found.items, cmp_found);
	cat->entries = calloc(found.n ? found.n : 1, sizeof *cat->entries);
	if (!cat->entries)
		goto fail;
	for (size_t i = 0; i < found.n; i++) {
		struct found *f = &found.items[i];
		if (cat->n && strcmp(cat->entries[cat->n - 1].skill->name, f->skill->name) == 0) {
			const struct catalog_entry *w = &cat->entries[cat->n - 1];
			if (strlist_add(&cat->shadowed, f->skill->dir ? f->skill->dir : "") < 0 ||
			    ((!cat->dup_names.n ||
			      strcmp(cat->dup_names.items[cat->dup_names.n - 1], w->skill->name)) &&
			     strlist_add(&cat->dup_names, w->skill->name) < 0))
				goto fail;
			if (strlist_addf(&cat->warnings,
					 "skill '%s' in %s is shadowed by the one in %s",
					 f->skill->name, f->skill->dir, w->skill->dir) < 0)
				goto fail;
			skill_unref(f->skill);
			scan_unref(f->scan);
			f->skill = NULL;
			f->scan = NULL;
			continue;
		}
		struct catalog_entry *e = &cat->entries[cat->n++];
		e->skill = f->skill;
		e->scan = f->scan;
		f->skill = NULL;
		f->scan = NULL;
		e->source = f->source;
		e->trust = config_skill_trust(c, e->skill->name, c->sources[f->source].trust);
		e->disabled = config_skill_disabled(c, e->skill->name);
		if (gate_entry(&b, e) < 0)
			goto fail;
		e->ngate = e->warnings.n;
	}
	free(found.items);
	found.items = NULL;
	free(ri.by_dir);
	ri.by_dir = NULL;

	if (resolve_all_refs(cat) < 0 || list_renamed(cat, NULL, NULL) < 0)
		goto fail;
	strlist_sort(&cat->shadowed);
	cat->config = c;
	cat->updatable = b.blockers == 0;
	cat->nbuilt_warnings = cat->warnings.n;
	return cat;
fail:
	for (size_t i = 0; i < found.n; i++) {
		skill_unref(found.items[i].skill);
		scan_unref(found.items[i].scan);
	}
	free(found.items);
	free(ri.by_dir);
	strlist_free(&dirty_sorted);
	findings_rules_free(rules);
	if (rerr) /* a mistake in injection_patterns.def: never silent */
		fprintf(stderr, "skillfs: %s\n", rerr);
	free(rerr);
	catalog_free(cat);
	return NULL;
}

struct catalog *catalog_build_with(const struct config *c, const struct catalog *prev,
				   const struct skill_limits *lim, const struct strlist *dirty,
				   const struct pin_history *hist)
{
	return build(c, prev, lim, dirty, hist, false);
}

struct catalog *catalog_build_checked(const struct config *c, const struct catalog *prev,
				      const struct skill_limits *lim,
				      const struct pin_history *hist)
{
	return build(c, prev, lim, NULL, hist, true);
}

int catalog_fingerprint(const char *dir, bool recursive, const struct skill_limits *lim,
			char out[FP_TEXT_SIZE], char **err)
{
	*err = NULL;
	struct stat st;
	int bad = stat(dir, &st) < 0 ? errno : S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
	if (bad) {
		if (asprintf(err, "%s: %s", dir, strerror(bad)) < 0)
			*err = NULL;
		return -1;
	}
	struct config *c = config_default(&dir, 1);
	struct catalog *cat = NULL;
	int rc = -1;
	/* The source pinned to a digest it cannot have: its pin is then
	 * computed exactly as a mount computes it. */
	if (c && (c->sources[0].fingerprint = strdup("sha256:-"))) {
		c->sources[0].recursive = recursive;
		cat = catalog_build(c, NULL, lim, NULL);
	}
	const struct source_pin *pin = cat && cat->npins ? cat->pins[0] : NULL;
	if (pin) {
		snprintf(out, FP_TEXT_SIZE, "%s", pin->actual);
		rc = 0;
		for (size_t i = 0; i < pin->nscans && rc == 0; i++)
			if (!pin->scans[i] || pin->scans[i]->error)
				rc = 1;
		if (rc == 1) {
			const char *m = strstr(pin->message, "; in ");
			*err = strdup(m ? m + 2 : "some files could not be read");
		}
	} else if (cat) {
		/* no pin: the source could not be read; its warning says why */
		*err = strdup(cat->warnings.n ? cat->warnings.items[0] : "cannot read the directory");
	}
	if (rc < 0 && !*err)
		*err = strdup("out of memory");
	catalog_free(cat);
	config_free(c);
	return rc;
}

void catalog_free(struct catalog *cat)
{
	if (!cat)
		return;
	for (size_t i = 0; i < cat->n; i++) {
		skill_unref(cat->entries[i].skill);
		skill_unref(cat->entries[i].loaded);
		scan_unref(cat->entries[i].scan);
		strlist_free(&cat->entries[i].warnings);
		free(cat->entries[i].ref_subs);
	}
	free(cat->entries);
	strlist_free(&cat->warnings);
	strlist_free(&cat->delta.names);
	strlist_free(&cat->shadowed);
	strlist_free(&cat->dup_names);
	free(cat->renamed);
	for (size_t i = 0; i < cat->npins; i++)
		pin_unref(cat->pins[i]);
	free(cat->pins);
	free(cat);
}

/* ---- catalog_update: following a change in O(what changed) ---- */

/* One skill directory catalog_update looks at again. */
struct change {
	const char *dir;
	size_t source;
	const struct catalog_entry *was; /* prev's entry of dir, or NULL */
	struct catalog_entry now;        /* what dir holds now; now.skill NULL:
	                                    no skill */
};

/* prev's entry whose skill lies in dir, or NULL: the one named as the
 * directory, else one of the few named otherwise. */
static const struct catalog_entry *entry_in(const struct catalog *prev, const char *dir)
{
	const char *slash = strrchr(dir, '/');
	const struct catalog_entry *e = catalog_find(prev, slash ? slash + 1 : dir);
	if (e && strcmp(entry_dir(e), dir) == 0)
		return e;
	for (size_t i = 0; i < prev->nrenamed; i++)
		if (strcmp(entry_dir(&prev->entries[prev->renamed[i]]), dir) == 0)
			return &prev->entries[prev->renamed[i]];
	return NULL;
}

/* The skill directories dirty touches, each once (sorted: dirty is), into
 * dirs, and the index of the source of each into *sources. -1 with errno
 * EAGAIN when one lies where catalog_update cannot follow it, or ENOMEM. */
static int changed_dirs(const struct config *c, const struct strlist *dirty,
			struct strlist *dirs, size_t **sources)
{
	size_t cap = 0;
	for (size_t i = 0; i < dirty->n; i++) {
		const char *d = dirty->items[i];
		long si = -1;
		for (size_t k = 0; k < c->nsources; k++) {
			const char *sp = c->sources[k].path;
			size_t n = strlen(sp);
			if (strncmp(d, sp, n) != 0 || (d[n] != '\0' && d[n] != '/'))
				continue;
			if (si >= 0 || c->sources[k].recursive || c->sources[k].fingerprint) {
				errno = EAGAIN; /* in two sources, or one searched or pinned */
				return -1;
			}
			si = (long)k;
		}
		if (si < 0)
			continue; /* not in a source: not a skill's */
		size_t root = strlen(c->sources[si].path);
		if (d[root] == '\0')
			continue; /* the source: the names in it are listed too */
		const char *name = d + root + 1, *end = strchr(name, '/');
		size_t len = end ? (size_t)(end - d) : strlen(d);
		if (name[0] == '.')
			continue;
		if (strncmp(name, "SKILL.md", 8) == 0 && (name[8] == '\0' || name[8] == '/')) {
			errno = EAGAIN; /* the source may become one skill */
			return -1;
		}
		if (dirs->n && strlen(dirs->items[dirs->n - 1]) == len &&
		    strncmp(dirs->items[dirs->n - 1], d, len) == 0)
			continue;
		size_t *p = grow(*sources, &cap, dirs->n, sizeof *p, 16);
		if (!p || strlist_addf(dirs, "%.*s", (int)len, d) < 0)
			return -1;
		*sources = p;
		p[dirs->n - 1] = (size_t)si;
	}
	return 0;
}

static int cmp_change_name(const void *a, const void *b)
{
	const struct change *x = *(struct change *const *)a, *y = *(struct change *const *)b;
	return strcmp(x->now.skill->name, y->now.skill->name);
}

/* Copies prev's entry into e: references taken, its findings' warnings
 * kept, sub-skill references left for resolve_all_refs. */
static int entry_copy(struct catalog_entry *e, const struct catalog_entry *pe)
{
	*e = *pe;
	skill_ref(e->skill);
	if (e->loaded)
		skill_ref(e->loaded);
	scan_ref(e->scan);
	e->warnings = (struct strlist){ 0 };
	e->ref_subs = NULL;
	e->nref_subs = 0;
	e->is_referenced_sub = false;
	for (size_t k = 0; k < pe->ngate; k++)
		if (strlist_add(&e->warnings, pe->warnings.items[k]) < 0)
			return -1;
	return 0;
}

/* Whether what resolve_all_refs gave e differs from what it gave pe. */
static bool refs_differ(const struct catalog *cat, const struct catalog_entry *e,
			const struct catalog *prev, const struct catalog_entry *pe)
{
	if (e->nref_subs != pe->nref_subs || e->is_referenced_sub != pe->is_referenced_sub ||
	    !strlist_equal(&e->warnings, &pe->warnings))
		return true;
	for (size_t k = 0; k < e->nref_subs; k++)
		if (strcmp(cat->entries[e->ref_subs[k]].skill->name,
			   prev->entries[pe->ref_subs[k]].skill->name) != 0)
			return true;
	return false;
}

struct catalog *catalog_update(const struct config *c, const struct catalog *prev,
			       const struct skill_limits *lim, const struct strlist *dirty,
			       const struct pin_history *hist)
{
	if (!prev || !prev->updatable || prev->config != c || !dirty) {
		errno = EAGAIN;
		return NULL;
	}
	struct strlist sorted = { 0 }, dirs = { 0 };
	size_t *sources = NULL, *from = NULL, *count = NULL;
	struct change *ch = NULL;
	struct findings_rules *rules = NULL;
	char *rerr = NULL;
	bool *gone = NULL;
	size_t nch = 0, nadd = 0;
	int err = ENOMEM;
	struct catalog *cat = calloc(1, sizeof *cat);
	if (!cat || strlist_extend(&sorted, dirty) < 0)
		goto fail;
	strlist_sort(&sorted);
	if (changed_dirs(c, &sorted, &dirs, &sources) < 0) {
		err = errno;
		goto fail;
	}
	if (!(ch = calloc(dirs.n ? dirs.n : 1, sizeof *ch)) ||
	    !(gone = calloc(prev->n ? prev->n : 1, sizeof *gone)) ||
	    !(count = calloc(c->nsources ? c->nsources : 1, sizeof *count)) ||
	    !(cat->pins = calloc(c->nsources ? c->nsources : 1, sizeof *cat->pins)))
		goto fail;
	cat->npins = c->nsources;
	for (size_t i = 0; i < prev->npins && i < cat->npins; i++)
		cat->pins[i] = prev->pins[i] ? pin_ref(prev->pins[i]) : NULL;
	if (dirs.n && !(rules = findings_rules_new(&rerr)))
		goto fail;
	/* Each directory loaded again (its SKILL.md re-read: it is dirty). */
	for (size_t i = 0; i < dirs.n; i++) {
		struct change *x = &ch[nch++];
		x->dir = dirs.items[i];
		x->source = sources[i];
		x->was = entry_in(prev, x->dir);
		if (strlist_sorted_has(&prev->shadowed, x->dir) ||
		    (x->was && strlist_sorted_has(&prev->dup_names, x->was->skill->name))) {
			err = EAGAIN; /* a duplicate name: the full build settles it */
			goto fail;
		}
		const struct catalog_entry *one[1] = { x->was };
		struct reuse_index ri = { one, x->was ? 1 : 0 };
		struct stat st;
		if (stat(x->dir, &st) == 0 && S_ISDIR(st.st_mode) &&
		    load_skill_dir(x->dir, &(struct load_ctx){ &ri, lim, &sorted, rules, false },
				   &x->now.skill, &x->now.scan) < 0)
			goto fail;
		if (x->was)
			gone[x->was - prev->entries] = true;
		if (!x->now.skill)
			continue;
		nadd++;
		if (skill_name_unusable(x->now.skill->name) ||
		    strlist_sorted_has(&prev->dup_names, x->now.skill->name)) {
			err = EAGAIN; /* its warning is the full build's */
			goto fail;
		}
		struct catalog_entry *e = &x->now;
		e->source = x->source;
		e->trust = config_skill_trust(c, e->skill->name, c->sources[e->source].trust);
		e->disabled = config_skill_disabled(c, e->skill->name);
		struct build b = { .c = c, .prev = prev, .load = { .ri = &ri, .lim = lim },
				   .hist = hist, .cat = cat };
		if (gate_entry(&b, e) < 0)
			goto fail;
		e->ngate = e->warnings.n;
	}
	/* The merge: prev's entries that stay, and the ones loaded, by name. */
	struct change **add = malloc((nadd ? nadd : 1) * sizeof *add);
	if (!add)
		goto fail;
	size_t na = 0;
	for (size_t i = 0; i < nch; i++)
		if (ch[i].now.skill)
			add[na++] = &ch[i];
	if (na > 1)
		qsort(add, na, sizeof *add, cmp_change_name);
	size_t nkept = 0;
	for (size_t i = 0; i < prev->n; i++)
		nkept += !gone[i];
	cat->n = 0;
	if (!(cat->entries = calloc(nkept + na ? nkept + na : 1, sizeof *cat->entries)) ||
	    !(from = malloc((nkept + na ? nkept + na : 1) * sizeof *from))) {
		free(add);
		goto fail;
	}
	size_t pi = 0, ai = 0;
	while (pi < prev->n || ai < na) {
		while (pi < prev->n && gone[pi])
			pi++;
		if (pi >= prev->n && ai >= na)
			break;
		int cmp = pi >= prev->n ? 1
			  : ai >= na  ? -1
				      : strcmp(prev->entries[pi].skill->name, add[ai]->now.skill->name);
		if (cmp == 0 || (ai + 1 < na && strcmp(add[ai]->now.skill->name,
						       add[ai + 1]->now.skill->name) == 0)) {
			free(add);
			err = EAGAIN; /* a duplicate name: the full build settles it */
			goto fail;
		}
		struct catalog_entry *e = &cat->entries[cat->n];
		if (cmp < 0) {
			if (entry_copy(e, &prev->entries[pi]) < 0) {
				cat->n++;
				free(add);
				goto fail;
			}
			from[cat->n] = pi++;
		} else {
			*e = add[ai]->now;
			add[ai]->now = (struct catalog_entry){ 0 };
			from[cat->n] = SIZE_MAX;
			ai++;
		}
		count[e->source]++;
		cat->n++;
	}
	free(add);
	for (size_t i = 0; i < c->nsources; i++) {
		if (!count[i]) {
			err = EAGAIN; /* its warning is the full build's */
			goto fail;
		}
	}
	if (resolve_all_refs(cat) < 0 || list_renamed(cat, prev, from) < 0 ||
	    strlist_extend(&cat->warnings, &prev->warnings) < 0 ||
	    strlist_extend(&cat->shadowed, &prev->shadowed) < 0 ||
	    strlist_extend(&cat->dup_names, &prev->dup_names) < 0)
		goto fail;
	while (cat->warnings.n > prev->nbuilt_warnings)
		free(cat->warnings.items[--cat->warnings.n]);
	/* What changed: the directories loaded again, and the entries whose
	 * sub-skill references resolve otherwise now. */
	for (size_t i = 0; i < nch; i++)
		if (ch[i].was && strlist_add(&cat->delta.names, ch[i].was->skill->name) < 0)
			goto fail;
	for (size_t i = 0; i < cat->n; i++) {
		const struct catalog_entry *e = &cat->entries[i];
		bool changed = from[i] == SIZE_MAX;
		if (!changed && (e->nref_subs || e->is_referenced_sub || e->warnings.n > e->ngate ||
				 prev->entries[from[i]].nref_subs ||
				 prev->entries[from[i]].is_referenced_sub ||
				 prev->entries[from[i]].warnings.n > prev->entries[from[i]].ngate))
			changed = refs_differ(cat, e, prev, &prev->entries[from[i]]);
		if (from[i] == SIZE_MAX)
			cat->delta.names_changed |= catalog_index(prev, e->skill->name) < 0;
		if (changed && strlist_add(&cat->delta.names, e->skill->name) < 0)
			goto fail;
	}
	for (size_t i = 0; i < nch && !cat->delta.names_changed; i++)
		cat->delta.names_changed = ch[i].was && catalog_index(cat, ch[i].was->skill->name) < 0;
	strlist_sort_unique(&cat->delta.names);
	cat->delta.base = prev;
	cat->config = c;
	cat->updatable = true;
	cat->nbuilt_warnings = prev->nbuilt_warnings;
	err = 0;
fail:
	for (size_t i = 0; ch && i < nch; i++) {
		skill_unref(ch[i].now.skill);
		skill_unref(ch[i].now.loaded);
		scan_unref(ch[i].now.scan);
		strlist_free(&ch[i].now.warnings);
	}
	free(ch);
	free(gone);
	free(count);
	free(from);
	free(sources);
	strlist_free(&dirs);
	strlist_free(&sorted);
	findings_rules_free(rules);
	if (rerr)
		fprintf(stderr, "skillfs: %s\n", rerr);
	free(rerr);
	if (err) {
		catalog_free(cat);
		errno = err;
		return NULL;
	}
	return cat;
}
