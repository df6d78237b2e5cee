#include "scan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "grow.h"

/* The walk: the files found so far and what went wrong. */
struct walk {
	const char *root;      /* the skill's directory */
	char root_real[PATH_MAX];
	bool have_real;
	struct scan_file *files;
	size_t n, cap;
	struct buf error;      /* "; "-separated */
	bool full;             /* SCAN_FILES_MAX reached */
	bool oom;
};

/* Adds a "; "-separated note of what keeps the digest from covering
 * every file. */
__attribute__((format(printf, 2, 3)))
static void note(struct walk *w, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if ((w->error.len && buf_puts(&w->error, "; ") < 0) ||
	    buf_vprintf(&w->error, fmt, ap) < 0)
		w->oom = true;
	va_end(ap);
}

static int add_file(struct walk *w, const char *rel)
{
	struct scan_file *p = grow(w->files, &w->cap, w->n, sizeof *p, 16);
	if (!p)
		return -1;
	w->files = p;
	struct scan_file *f = &w->files[w->n];
	memset(f, 0, sizeof *f);
	if (!(f->path = strdup(rel)))
		return -1;
	w->n++;
	return 0;
}

/* Whether path (a symbolic link below the root) leads to a regular file
 * inside the root. */
static bool link_inside(struct walk *w, const char *path)
{
	char real[PATH_MAX];
	struct stat st;
	if (!w->have_real) {
		if (!realpath(w->root, w->root_real))
			return false;
		w->have_real = true;
	}
	size_t n = strlen(w->root_real);
	return realpath(path, real) && strncmp(real, w->root_real, n) == 0 &&
	       (real[n] == '/' || n == 1) && stat(real, &st) == 0 && S_ISREG(st.st_mode);
}

static void walk_dir(struct walk *w, const char *rel, int depth);

/* Collects entry name (of type, readdir's d_type) of directory rel: a
 * file, or the files below it. */
static void walk_entry(struct walk *w, const char *rel, int depth, const char *name,
		       unsigned char type)
{
	char path[PATH_MAX], sub[PATH_MAX];
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return;
	struct stat st;
	if (snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", name) >= (int)sizeof sub ||
	    snprintf(path, sizeof path, "%s/%s", w->root, sub) >= (int)sizeof path) {
		note(w, "a path too long to read below %s", rel[0] ? rel : ".");
		return;
	}
	/* The entry's type as the directory gives it, else as lstat says
	 * (the file's identity is taken when it is read). */
	if (type == DT_DIR)
		st.st_mode = S_IFDIR;
	else if (type == DT_REG)
		st.st_mode = S_IFREG;
	else if (lstat(path, &st) < 0)
		return; /* gone meanwhile: a change that brings a rescan */
	if (S_ISDIR(st.st_mode)) {
		if (strcmp(name, ".git") == 0)
			return;
		if (depth + 1 > SCAN_DEPTH_MAX)
			note(w, "%s: deeper than %d levels, not read", sub, SCAN_DEPTH_MAX);
		else
			walk_dir(w, sub, depth + 1);
		return;
	}
	if (!S_ISREG(st.st_mode) && !(S_ISLNK(st.st_mode) && link_inside(w, path)))
		return;
	if (w->n >= SCAN_FILES_MAX) {
		note(w, "more than %d files: %s and others not read", SCAN_FILES_MAX, sub);
		w->full = true;
		return;
	}
	if (add_file(w, sub) < 0)
		w->oom = true;
}

/* Collects the files below rel ("" for the root). */
static void walk_dir(struct walk *w, const char *rel, int depth)
{
	char path[PATH_MAX];
	snprintf(path, sizeof path, "%s%s%s", w->root, rel[0] ? "/" : "", rel);
	DIR *d = opendir(path);
	if (!d) {
		note(w, "cannot read %s: %s", rel[0] ? rel : ".", strerror(errno));
		return;
	}
	struct dirent *de;
	while (!w->oom && !w->full && (de = readdir(d)))
		walk_entry(w, rel, depth, de->d_name, de->d_type);
	closedir(d);
}

/* Collects the files of the root, from its entries top when the caller
 * read them whole, else read here. */
static void walk_root(struct walk *w, const struct scan_listing *top)
{
	if (!top || !scan_listing_whole(top)) {
		walk_dir(w, "", 0);
		return;
	}
	for (size_t i = 0; i < top->n && !w->oom && !w->full; i++)
		walk_entry(w, "", 0, top->v[i].name, top->v[i].type);
}

int scan_listing_read(const char *dir, struct scan_listing *l)
{
	*l = (struct scan_listing){ 0 };
	DIR *d = opendir(dir);
	if (!d) {
		l->error = errno;
		return 0;
	}
	for (;;) {
		errno = 0;
		struct dirent *de = readdir(d);
		if (!de) {
			l->error = errno;
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (l->n == SCAN_LISTING_MAX) {
			l->cut = true;
			break;
		}
		struct scan_entry *p = grow(l->v, &l->cap, l->n, sizeof *p, 8);
		if (!p || !(p[l->n].name = strdup(de->d_name))) {
			if (p)
				l->v = p;
			closedir(d);
			scan_listing_free(l);
			return -1;
		}
		l->v = p;
		l->v[l->n++].type = de->d_type;
	}
	closedir(d);
	return 0;
}

bool scan_listing_whole(const struct scan_listing *l)
{
	return !l->error && !l->cut;
}

const struct scan_entry *scan_listing_find(const struct scan_listing *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].name, name) == 0)
			return &l->v[i];
	return NULL;
}

void scan_listing_free(struct scan_listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].name);
	free(l->v);
	*l = (struct scan_listing){ 0 };
}

static int cmp_file(const void *a, const void *b)
{
	return strcmp(((const struct scan_file *)a)->path, ((const struct scan_file *)b)->path);
}

const struct scan_file *scan_find(const struct skill_scan *s, const char *path)
{
	if (!s || !s->n)
		return NULL;
	struct scan_file key = { .path = (char *)path };
	return bsearch(&key, s->files, s->n, sizeof *s->files, cmp_file);
}

static bool same_time(struct timespec a, struct timespec b)
{
	return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* Whether a and b were the same file as it was: device, inode, size,
 * mtime and ctime. */
static bool same_identity(const struct scan_file *a, const struct scan_file *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       same_time(a->mtime, b->mtime) && same_time(a->ctime, b->ctime);
}

/* Takes what prev knew of f (its identity set) when prev found the same
 * identity. 1: taken, 0: not known, -1: ENOMEM. */
static int reuse(struct scan_file *f, const struct skill_scan *prev)
{
	const struct scan_file *p = scan_find(prev, f->path);
	if (!p || !same_identity(p, f))
		return 0;
	/* Changed close to when prev read it: maybe again within the same
	 * tick, after it was read. */
	int64_t changed = (int64_t)f->ctime.tv_sec * 1000000000 + f->ctime.tv_nsec;
	int64_t read_at = (int64_t)prev->made.tv_sec * 1000000000 + prev->made.tv_nsec;
	if (changed >= read_at - SCAN_RACY_NS)
		return 0;
	memcpy(f->sha, p->sha, FP_SIZE);
	f->scanned = p->scanned;
	f->more = p->more;
	if (p->nfindings) {
		f->findings = malloc(p->nfindings * sizeof *f->findings);
		if (!f->findings)
			return -1;
		memcpy(f->findings, p->findings, p->nfindings * sizeof *f->findings);
		f->nfindings = p->nfindings;
	}
	return 1;
}

/* Scans the text (got bytes, the first want of the file, want 0: not
 * scanned) into f. 0 or -1 on ENOMEM. A file that grew past the limit
 * while read is hashed whole but not scanned, as one over it. */
static int scan_text(struct scan_file *f, const char *text, size_t want, size_t got,
		     const struct findings_rules *rules)
{
	if (!want || got != want || !findings_is_text(text, got))
		return 0;
	f->scanned = true;
	return findings_scan(rules, text, got, &f->findings, &f->nfindings, &f->more);
}

/* Hashes (and, text, scans) file f, from the caller's bytes when given
 * holds them. 0, -1 on ENOMEM, 1 when it cannot be read (noted). */
static int read_file(struct walk *w, struct scan_file *f, const struct skill_scan *prev,
		     const struct findings_rules *rules, const struct scan_given *given)
{
	bool have = given && given->text && S_ISREG(given->st.st_mode) &&
		    given->st.st_size >= 0 && (size_t)given->st.st_size == given->len &&
		    strcmp(f->path, given->path) == 0;
	char path[PATH_MAX];
	struct stat st;
	int fd = -1, err = 0;
	if (have) {
		st = given->st;
	} else {
		snprintf(path, sizeof path, "%s/%s", w->root, f->path);
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		err = fd < 0 ? errno : fstat(fd, &st) < 0 ? errno : S_ISREG(st.st_mode) ? 0 : EINVAL;
	}
	if (err) {
		note(w, "cannot read %s: %s", f->path, strerror(err));
		if (fd >= 0)
			close(fd);
		return 1;
	}
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->size = st.st_size;
	f->mtime = st.st_mtim;
	f->ctime = st.st_ctim;
	int r = reuse(f, prev);
	if (r != 0) {
		if (fd >= 0)
			close(fd);
		return r < 0 ? -1 : 0;
	}
	size_t want = st.st_size <= SCAN_TEXT_MAX ? (size_t)st.st_size : 0;
	if (have) {
		fp_sha256(given->text, given->len, f->sha);
		return scan_text(f, given->text, want, given->len, rules);
	}
	char *text = malloc(want + 1);
	size_t got = 0;
	if (!text) {
		close(fd);
		return -1;
	}
	int rc = fp_sha256_fd(fd, f->sha, text, want, &got);
	close(fd);
	if (rc < 0) {
		free(text);
		note(w, "cannot read %s: %s", f->path, strerror(-rc));
		return 1;
	}
	rc = scan_text(f, text, want, got, rules);
	free(text);
	return rc;
}

/* Frees the files v (n of them); their paths too unless packed (they
 * are then in v's block: files_pack). */
static void files_free(struct scan_file *v, size_t n, bool packed)
{
	for (size_t i = 0; i < n; i++) {
		if (!packed)
			free(v[i].path);
		free(v[i].findings);
	}
	free(v);
}

/* The n files v (taken) as a scan keeps them, as long as its skill: in
 * one block with their paths, with no room beyond them (growing, a skill
 * of two files held 16 places, 2 KiB; and each path was a block of its
 * own). NULL on ENOMEM (v left as it was) or when n is 0 (v freed). */
static struct scan_file *files_pack(struct scan_file *v, size_t n)
{
	if (!n) {
		free(v);
		return NULL;
	}
	size_t bytes = n * sizeof *v;
	for (size_t i = 0; i < n; i++)
		bytes += strlen(v[i].path) + 1;
	struct scan_file *p = malloc(bytes);
	if (!p)
		return NULL;
	memcpy(p, v, n * sizeof *v);
	char *at = (char *)(p + n);
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(v[i].path) + 1;
		memcpy(at, v[i].path, len);
		free(v[i].path);
		p[i].path = at;
		at += len;
	}
	free(v);
	return p;
}

struct skill_scan *scan_dir(const char *dir, const struct skill_scan *prev,
			    const struct findings_rules *rules, const struct scan_given *given)
{
	struct walk w = { .root = dir };
	struct skill_scan *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->refs = 1;
	clock_gettime(CLOCK_REALTIME, &s->made);
	walk_root(&w, given ? given->top : NULL);
	for (size_t i = 0; i < w.n && !w.oom; i++) {
		int rc = read_file(&w, &w.files[i], prev, rules, given);
		if (rc < 0) {
			w.oom = true;
		} else if (rc > 0) { /* unreadable: not a file of the digest */
			free(w.files[i].path);
			free(w.files[i].findings);
			w.files[i] = w.files[--w.n];
			i--;
		}
	}
	if (w.n > 1)
		qsort(w.files, w.n, sizeof *w.files, cmp_file);
	struct scan_file *packed = w.oom ? NULL : files_pack(w.files, w.n);
	if (w.oom || (!packed && w.n)) {
		files_free(w.files, w.n, false);
		buf_free(&w.error);
		scan_unref(s);
		return NULL;
	}
	s->files = packed;
	s->n = w.n;
	w.files = NULL;
	struct fp_line *lines = NULL;
	size_t nl = 0;
	if (!w.oom && scan_lines(s, NULL, &lines, &nl) < 0)
		w.oom = true;
	if (!w.oom)
		fp_digest_lines(lines, nl, s->digest);
	scan_lines_free(lines, nl);
	if (!w.oom && w.error.len && !(s->error = buf_steal(&w.error, NULL)))
		w.oom = true;
	buf_free(&w.error);
	for (size_t i = 0; i < s->n; i++)
		for (size_t k = 0; k < s->files[i].nfindings; k++) {
			if (findings_rule_level(s->files[i].findings[k].rule) == FINDING_HIGH)
				s->nhigh++;
			else
				s->nlow++;
		}
	if (w.oom) {
		scan_unref(s);
		return NULL;
	}
	return s;
}

bool scan_unchanged(const struct skill_scan *a, const struct skill_scan *b)
{
	if (a->n != b->n || (a->error == NULL) != (b->error == NULL) ||
	    (a->error && strcmp(a->error, b->error) != 0))
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const struct scan_file *x = &a->files[i], *y = &b->files[i];
		if (strcmp(x->path, y->path) != 0 || memcmp(x->sha, y->sha, FP_SIZE) != 0 ||
		    !same_identity(x, y))
			return false;
	}
	return true;
}

struct skill_scan *scan_ref(struct skill_scan *s)
{
	if (s)
		__atomic_add_fetch(&s->refs, 1, __ATOMIC_ACQ_REL);
	return s;
}

void scan_unref(struct skill_scan *s)
{
	if (!s || __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) != 0)
		return;
	files_free(s->files, s->n, true);
	free(s->error);
	free(s);
}

int scan_lines(const struct skill_scan *s, const char *prefix, struct fp_line **lines,
	       size_t *n)
{
	if (!s || !s->n)
		return 0;
	struct fp_line *p = realloc(*lines, (*n + s->n) * sizeof *p);
	if (!p)
		return -1;
	*lines = p;
	bool pre = prefix && prefix[0];
	for (size_t i = 0; i < s->n; i++) {
		char *path;
		if (pre ? asprintf(&path, "%s/%s", prefix, s->files[i].path) < 0
			: !(path = strdup(s->files[i].path)))
			return -1;
		p[*n].path = path;
		memcpy(p[*n].sha, s->files[i].sha, FP_SIZE);
		(*n)++;
	}
	return 0;
}

void scan_lines_free(struct fp_line *lines, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free((char *)lines[i].path);
	free(lines);
}

int scan_findings_text(const struct skill_scan *s, struct buf *out)
{
	for (size_t i = 0; s && i < s->n; i++) {
		const struct scan_file *f = &s->files[i];
		for (size_t k = 0; k < f->nfindings; k++)
			if (finding_format(out, f->path, &f->findings[k]) < 0)
				return -1;
		if (f->more && buf_printf(out, "%s: %zu more findings not shown\n", f->path,
					  f->more) < 0)
			return -1;
	}
	return 0;
}

json_t *scan_findings_json(const struct skill_scan *s)
{
	json_t *a = json_array();
	for (size_t i = 0; a && s && i < s->n; i++) {
		const struct scan_file *f = &s->files[i];
		for (size_t k = 0; a && k < f->nfindings; k++) {
			unsigned r = f->findings[k].rule;
			json_t *o = json_pack("{s:s, s:I, s:s, s:s, s:s}", "file", f->path, "line",
					      (json_int_t)f->findings[k].line, "level",
					      finding_level_name(findings_rule_level(r)), "id",
					      findings_rule_id(r), "reason", findings_rule_reason(r));
			if (!o || json_array_append_new(a, o) < 0) {
				json_decref(a);
				a = NULL;
			}
		}
	}
	return a;
}

bool scan_first_high(const struct skill_scan *s, char *out, size_t size)
{
	for (size_t i = 0; s && i < s->n; i++)
		for (size_t k = 0; k < s->files[i].nfindings; k++) {
			unsigned r = s->files[i].findings[k].rule;
			if (findings_rule_level(r) != FINDING_HIGH)
				continue;
			snprintf(out, size, "%s:%u: %s: %s", s->files[i].path,
				 s->files[i].findings[k].line, findings_rule_id(r),
				 findings_rule_reason(r));
			return true;
		}
	return false;
}
