/* learn_skill: writes a new skill into the source marked writable: true
 * (DESIGN.md section 7). The SKILL.md is built from the arguments (its
 * front-matter emitted with libyaml, every value quoted), parsed with the
 * skill parser before anything is written, and written with the skill's
 * other files into a temporary directory of the source that is renamed
 * into place (rename(2), never over an existing entry), so the watcher
 * sees one complete skill appear.
 *
 * What the model cannot do with it (it is the adversary): take a name any
 * skill of the catalogue has, grant the new skill a tool or a command this
 * run is not allowed (a learned skill always declares allowed-tools, so it
 * can never open a later run to policy all), write outside the new skill's
 * directory (plain relative paths only), or plant a SKILL.md anywhere in
 * it (no sub-skills, nothing a recursive scan would take for a skill). */
#include "tool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "catalog.h"
#include "grants.h"
#include "skill.h"

#define LEARN_DESCRIPTION_MAX 1024   /* bytes, as the Agent Skills format */
#define LEARN_TOOLS_MAX 64           /* allowed_tools items */
#define LEARN_TOOL_ITEM_MAX 256      /* bytes of one item */
#define LEARN_FILES_MAX 32           /* files besides SKILL.md */
#define LEARN_FILE_MAX ((size_t)256 << 10)
#define LEARN_FILES_TOTAL_MAX ((size_t)1 << 20)
#define LEARN_PATH_MAX 200           /* bytes of one relative path */
#define LEARN_PATH_DEPTH 8           /* components of one path */
#define LEARN_COMPONENT_MAX 64       /* bytes of one component */

static bool has_control(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7F)
			return true;
	return false;
}

/* ---- arguments ---- */

/* Whether path is a plain relative path for a file of the new skill; else
 * *why says what is wrong. */
static bool path_plain(const char *path, const char **why)
{
	size_t len = strlen(path);
	if (len == 0 || len > LEARN_PATH_MAX) {
		*why = "must be 1 to 200 bytes";
		return false;
	}
	if (path[0] == '/') {
		*why = "is absolute; give a path relative to the skill's directory";
		return false;
	}
	size_t depth = 0;
	for (const char *p = path; *p;) {
		const char *e = strchrnul(p, '/');
		size_t n = (size_t)(e - p);
		if (n == 0) {
			*why = "has an empty component ('//' or a trailing '/')";
			return false;
		}
		if (n == 2 && p[0] == '.' && p[1] == '.') {
			*why = "contains '..'";
			return false;
		}
		if (p[0] == '.') {
			*why = "has a component starting with '.'";
			return false;
		}
		if (n > LEARN_COMPONENT_MAX) {
			*why = "has a component over 64 bytes";
			return false;
		}
		for (size_t i = 0; i < n; i++) {
			char ch = p[i];
			if (!(ch >= 'a' && ch <= 'z') && !(ch >= 'A' && ch <= 'Z') &&
			    !(ch >= '0' && ch <= '9') && ch != '.' && ch != '_' && ch != '-') {
				*why = "may hold only letters, digits, '.', '_', '-' and '/'";
				return false;
			}
		}
		if (n == 8 && strncasecmp(p, "SKILL.md", 8) == 0) {
			*why = "names a SKILL.md (the skill's own is made from name, "
			       "description and body; a skill cannot hold another)";
			return false;
		}
		if (depth == 0 && *e == '/' && n == 6 && strncasecmp(p, "skills", 6) == 0) {
			*why = "is under skills/, where sub-skills live; a learned "
			       "skill has none";
			return false;
		}
		if (++depth > LEARN_PATH_DEPTH) {
			*why = "is more than 8 directories deep";
			return false;
		}
		p = *e ? e + 1 : e;
		if (*e && !*p) {
			*why = "has an empty component ('//' or a trailing '/')";
			return false;
		}
	}
	return true;
}

/* files: an object of plain relative paths to text; false (error set)
 * when anything is wrong. */
static bool check_files(struct call *c, json_t *files)
{
	if (!files || json_is_null(files))
		return true;
	if (!json_is_object(files)) {
		tool_fail(c, "argument 'files' must be an object mapping relative "
			  "paths to text, e.g. {\"scripts/run.sh\": \"...\"}");
		return false;
	}
	if (json_object_size(files) > LEARN_FILES_MAX) {
		tool_fail(c, "argument 'files' has %zu files; at most %d",
			  json_object_size(files), LEARN_FILES_MAX);
		return false;
	}
	size_t total = 0;
	const char *path;
	json_t *v;
	json_object_foreach(files, path, v) {
		const char *why = NULL;
		char *q = skill_quote(path);
		if (!q) {
			c->oom = true;
			return false;
		}
		bool ok = false;
		if (!path_plain(path, &why))
			tool_fail(c, "files: path %s %s", q, why);
		else if (!json_is_string(v))
			tool_fail(c, "files: the content of %s must be a string", q);
		else if (json_string_length(v) > LEARN_FILE_MAX)
			tool_fail(c, "files: %s has %zu bytes; at most %zu", q,
				  json_string_length(v), LEARN_FILE_MAX);
		else if (!tool_is_text(json_string_value(v), json_string_length(v)))
			tool_fail(c, "files: %s is not text (it contains a NUL character)", q);
		else
			ok = true;
		if (ok) {
			total += json_string_length(v);
			/* One path must not be a directory of another. */
			size_t n = strlen(path);
			const char *other;
			json_t *ov;
			json_object_foreach(files, other, ov) {
				if (strncmp(other, path, n) == 0 && other[n] == '/') {
					tool_fail(c, "files: %s is both a file and a directory", q);
					ok = false;
					break;
				}
			}
		}
		free(q);
		if (!ok)
			return false;
	}
	if (total > LEARN_FILES_TOTAL_MAX) {
		tool_fail(c, "argument 'files' holds %zu bytes in all; at most %zu", total,
			  LEARN_FILES_TOTAL_MAX);
		return false;
	}
	return true;
}

/* Whether a skill of the catalogue (an entry, valid or not, or a directory
 * sub-skill of one) is called name. */
static bool name_taken(const struct catalog *cat, const char *name)
{
	for (size_t i = 0; i < cat->n; i++) {
		const struct skill *s = cat->entries[i].skill;
		if (!s)
			continue;
		if ((s->name && strcmp(s->name, name) == 0) ||
		    (s->dir_name && strcmp(s->dir_name, name) == 0))
			return true;
		for (size_t k = 0; k < s->nsubs; k++)
			if (s->subs[k] && s->subs[k]->name && strcmp(s->subs[k]->name, name) == 0)
				return true;
	}
	return false;
}

/* Whether the run's list allows what item grants: the tool, and, for an
 * item with a command pattern, a pattern of the run's covering it (or
 * the tool unrestricted); else the error is set. */
static bool item_within(struct call *c, const struct grants *allow, const char *raw)
{
	struct tool_grant g;
	if (tool_grant_parse(raw, &g) < 0) {
		c->oom = true;
		return false;
	}
	bool ok = false;
	char *q = skill_quote(raw), *why = NULL;
	const struct grant_tool *t = allow ? grants_find(allow, g.tool) : NULL;
	if (!q) {
		c->oom = true;
	} else if (!*g.tool || strpbrk(g.tool, "() \t")) {
		tool_fail(c, "allowed_tools: item %s is not a tool name", q);
	} else if (!t) {
		tool_fail(c, "allowed_tools: item %s names a tool this run is not "
			  "allowed; a learned skill can only grant tools of the run "
			  "that writes it", q);
	} else if (!g.pattern) {
		if (t->unrestricted)
			ok = true;
		else
			tool_fail(c, "allowed_tools: item %s grants '%s' for any command, "
				  "but this run has it only for some; give the item with "
				  "one of this run's patterns, e.g. '%s(%s:*)'", q, t->name,
				  raw, t->patterns.n ? t->patterns.items[0] : "");
	} else if (!grants_tool_has_patterns(t->name)) {
		tool_fail(c, "allowed_tools: item %s: '%s' takes no command pattern",
			  q, t->name);
	} else if (grants_tool_pattern_check(t->name, g.pattern, &why) < 0) {
		if (why)
			tool_fail(c, "allowed_tools: item %s grants nothing: %s", q, why);
		else
			c->oom = true;
	} else if (t->unrestricted) {
		ok = true;
	} else {
		for (size_t i = 0; i < t->patterns.n && !ok; i++)
			ok = grants_tool_pattern_covers(t->name, t->patterns.items[i],
							g.pattern);
		if (!ok)
			tool_fail(c, "allowed_tools: item %s admits commands this run's "
				  "patterns for '%s' do not; a learned skill can only "
				  "grant what the run that writes it has", q, t->name);
	}
	free(why);
	free(q);
	free(g.tool);
	free(g.pattern);
	free(g.raw);
	return ok;
}

/* allowed_tools: absent (none), or an array of strings each within the
 * run's list. */
static bool check_tools(struct call *c, json_t *tools)
{
	if (!tools || json_is_null(tools))
		return true;
	if (!json_is_array(tools)) {
		tool_fail(c, "argument 'allowed_tools' must be an array of tool names, "
			  "e.g. [\"read\", \"Bash(git log:*)\"]");
		return false;
	}
	if (json_array_size(tools) > LEARN_TOOLS_MAX) {
		tool_fail(c, "argument 'allowed_tools' has %zu items; at most %d",
			  json_array_size(tools), LEARN_TOOLS_MAX);
		return false;
	}
	size_t i;
	json_t *v;
	json_array_foreach(tools, i, v) {
		const char *s = json_string_value(v);
		if (!s || strlen(s) != json_string_length(v) || !*s ||
		    json_string_length(v) > LEARN_TOOL_ITEM_MAX || has_control(s)) {
			tool_fail(c, "allowed_tools: item %zu must be a tool name of 1 to "
				  "%d characters, without control characters", i + 1,
				  LEARN_TOOL_ITEM_MAX);
			return false;
		}
		if (!item_within(c, c->ctx->allow, s))
			return false;
	}
	return true;
}

/* ---- SKILL.md ---- */

static int emit_to_buf(void *data, unsigned char *bytes, size_t size)
{
	return buf_append(data, bytes, size) == 0;
}

static int emit_scalar(yaml_emitter_t *em, const char *s, yaml_scalar_style_t style)
{
	yaml_event_t ev;
	if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s),
					  style == YAML_PLAIN_SCALAR_STYLE, 1, style))
		return -1;
	return yaml_emitter_emit(em, &ev) ? 0 : -1;
}

/* The front-matter's YAML (without the --- lines): name, description and
 * allowed-tools, every value double-quoted so that no text reads as
 * another type or as more YAML. Returns 0, or -1 (ENOMEM). */
static int frontmatter(const char *name, const char *desc, json_t *tools, struct buf *out)
{
	yaml_emitter_t em;
	yaml_event_t ev;
	if (!yaml_emitter_initialize(&em))
		return -1;
	yaml_emitter_set_output(&em, emit_to_buf, out);
	yaml_emitter_set_unicode(&em, 1);
	yaml_emitter_set_width(&em, -1);
	yaml_emitter_set_break(&em, YAML_LN_BREAK);
	int rc = -1;
	const yaml_scalar_style_t q = YAML_DOUBLE_QUOTED_SCALAR_STYLE;
	if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) ||
	    !yaml_emitter_emit(&em, &ev) ||
	    !yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) ||
	    !yaml_emitter_emit(&em, &ev) ||
	    !yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE) ||
	    !yaml_emitter_emit(&em, &ev) ||
	    emit_scalar(&em, "name", YAML_PLAIN_SCALAR_STYLE) < 0 ||
	    emit_scalar(&em, name, q) < 0 ||
	    emit_scalar(&em, "description", YAML_PLAIN_SCALAR_STYLE) < 0 ||
	    emit_scalar(&em, desc, q) < 0 ||
	    emit_scalar(&em, "allowed-tools", YAML_PLAIN_SCALAR_STYLE) < 0 ||
	    !yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_FLOW_SEQUENCE_STYLE) ||
	    !yaml_emitter_emit(&em, &ev))
		goto out;
	size_t i;
	json_t *v;
	json_array_foreach(tools, i, v)
		if (emit_scalar(&em, json_string_value(v), q) < 0)
			goto out;
	if (!yaml_sequence_end_event_initialize(&ev) || !yaml_emitter_emit(&em, &ev) ||
	    !yaml_mapping_end_event_initialize(&ev) || !yaml_emitter_emit(&em, &ev) ||
	    !yaml_document_end_event_initialize(&ev, 1) || !yaml_emitter_emit(&em, &ev) ||
	    !yaml_stream_end_event_initialize(&ev) || !yaml_emitter_emit(&em, &ev) ||
	    !yaml_emitter_flush(&em))
		goto out;
	/* An implicit end may still be marked "..."; the closing --- ends it. */
	if (out->len >= 4 && memcmp(out->data + out->len - 4, "...\n", 4) == 0)
		out->data[out->len -= 4] = '\0';
	rc = buf_puts(out, "") < 0 ? -1 : 0;
out:
	yaml_emitter_delete(&em);
	return rc;
}

/* The SKILL.md text of the new skill into out, parsed with the skill
 * parser: the parsed skill (the caller unrefs it), or NULL with the error
 * set (the parser's reason) or c->oom. */
static struct skill *build_skill_md(struct call *c, const char *name, const char *desc,
				    json_t *tools, const char *body, size_t body_len,
				    struct buf *out)
{
	if (buf_puts(out, "---\n") < 0 || frontmatter(name, desc, tools, out) < 0 ||
	    buf_puts(out, "---\n") < 0 || buf_append(out, body, body_len) < 0 ||
	    ((body_len == 0 || body[body_len - 1] != '\n') && buf_puts(out, "\n") < 0)) {
		c->oom = true;
		return NULL;
	}
	struct skill *s = skill_parse(name, NULL, out->data, out->len, NULL);
	if (!s) {
		c->oom = true;
		return NULL;
	}
	if (!s->valid) {
		tool_fail(c, "the skill is invalid: %s", s->error ? s->error : "(no reason)");
		skill_unref(s);
		return NULL;
	}
	/* What was written must read back as exactly what was asked for. */
	bool same = s->name && strcmp(s->name, name) == 0 && s->description &&
		    strcmp(s->description, desc) == 0 && s->allowed_tools.declared &&
		    s->allowed_tools.n == json_array_size(tools);
	for (size_t i = 0; same && i < s->allowed_tools.n; i++)
		same = s->allowed_tools.items[i].raw &&
		       strcmp(s->allowed_tools.items[i].raw,
			      json_string_value(json_array_get(tools, i))) == 0;
	if (!same) {
		tool_fail(c, "internal error: the SKILL.md built does not read back as "
			  "the arguments; nothing was written");
		skill_unref(s);
		return NULL;
	}
	return s;
}

/* ---- writing ---- */

/* Who the new files belong to: the source directory's owner when the
 * daemon is root (a user's source stays theirs), else the daemon. */
struct owner {
	bool give;
	uid_t uid;
	gid_t gid;
};

static int own(const struct owner *o, int fd)
{
	return o->give ? fchown(fd, o->uid, o->gid) : 0;
}

/* Creates file name in dirfd with data (a new file; mode exact). */
static int put_file(int dirfd, const char *name, const char *data, size_t len, mode_t mode,
		    const struct owner *o)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	int rc = 0;
	for (size_t off = 0; rc == 0 && off < len;) {
		ssize_t w = write(fd, data + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			rc = -1;
		else
			off += (size_t)w;
	}
	if (rc == 0 && (own(o, fd) < 0 || fchmod(fd, mode) < 0 || fsync(fd) < 0))
		rc = -1;
	int e = errno;
	close(fd);
	errno = e;
	return rc;
}

/* Opens (making it when absent) directory name in dirfd. */
static int sub_dir(int dirfd, const char *name, const struct owner *o)
{
	bool made = mkdirat(dirfd, name, 0700) == 0;
	if (!made && errno != EEXIST)
		return -1;
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0 && made && (own(o, fd) < 0 || fchmod(fd, 0755) < 0)) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Writes the file at relative path (plain: checked) under rootfd. */
static int put_path(int rootfd, const char *path, const char *data, size_t len,
		    const struct owner *o)
{
	char part[LEARN_PATH_MAX + 1];
	int dirfd = rootfd;
	const char *p = path;
	int rc = 0;
	for (const char *e; rc == 0 && (e = strchr(p, '/')); p = e + 1) {
		memcpy(part, p, (size_t)(e - p));
		part[e - p] = '\0';
		int fd = sub_dir(dirfd, part, o);
		if (fd < 0) {
			rc = -1;
			break;
		}
		if (dirfd != rootfd)
			close(dirfd);
		dirfd = fd;
	}
	/* A script is made executable: its first line says how to run it. */
	mode_t mode = len >= 2 && data[0] == '#' && data[1] == '!' ? 0755 : 0644;
	if (rc == 0)
		rc = put_file(dirfd, p, data, len, mode, o);
	if (rc == 0 && dirfd != rootfd && fsync(dirfd) < 0)
		rc = -1;
	int e = errno;
	if (dirfd != rootfd)
		close(dirfd);
	errno = e;
	return rc;
}

/* Removes name (a directory this call made, or what is in it) from dfd. */
static void remove_tree(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		unlinkat(dfd, name, 0);
		return;
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (de->d_type == DT_DIR || de->d_type == DT_UNKNOWN)
			remove_tree(fd, de->d_name);
		else
			unlinkat(fd, de->d_name, 0);
	}
	closedir(d);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

/* Writes SKILL.md and files into <learn_dir>/<name> through a temporary
 * directory renamed into place; the error set on failure (nothing left
 * behind). */
static bool write_skill(struct call *c, const char *name, const struct buf *md, json_t *files)
{
	const char *dir = c->ctx->learn_dir;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		tool_fail(c, "the writable source cannot be opened: %s", strerror(errno));
		return false;
	}
	struct stat st;
	bool ok = false;
	char tmp[PATH_MAX];
	const char *tname = NULL;
	int tfd = -1;
	if (fstat(dfd, &st) < 0) {
		tool_fail(c, "the writable source cannot be read: %s", strerror(errno));
		goto out;
	}
	struct owner o = {.give = geteuid() == 0 && st.st_uid != 0, .uid = st.st_uid,
			  .gid = st.st_gid};
	if (faccessat(dfd, "SKILL.md", F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		tool_fail(c, "the writable source is one skill itself (it holds a "
			  "SKILL.md), not a directory of skills; nothing was written");
		goto out;
	}
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		tool_fail(c, "the writable source already holds '%s'; choose another "
			  "name", name);
		goto out;
	}
	if (snprintf(tmp, sizeof tmp, "%s/.learn-XXXXXX", dir) >= (int)sizeof tmp) {
		tool_fail(c, "the writable source's path is too long");
		goto out;
	}
	if (!mkdtemp(tmp)) {
		tool_fail(c, "cannot write into the writable source: %s", strerror(errno));
		goto out;
	}
	tname = strrchr(tmp, '/') + 1;
	tfd = openat(dfd, tname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (tfd < 0 || own(&o, tfd) < 0 ||
	    put_file(tfd, "SKILL.md", md->data, md->len, 0644, &o) < 0)
		goto failed;
	const char *path;
	json_t *v;
	json_object_foreach(files, path, v)
		if (put_path(tfd, path, json_string_value(v), json_string_length(v), &o) < 0)
			goto failed;
	if (fchmod(tfd, 0755) < 0 || fsync(tfd) < 0)
		goto failed;
	if (renameat2(dfd, tname, dfd, name, RENAME_NOREPLACE) < 0) {
		if (errno == EEXIST || errno == ENOTEMPTY) {
			tool_fail(c, "the writable source already holds '%s'; choose "
				  "another name", name);
			goto cleanup;
		}
		/* A file system without RENAME_NOREPLACE: a directory is
		 * renamed over nothing but an empty directory, refused below. */
		if (errno != EINVAL ||
		    fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT ||
		    renameat(dfd, tname, dfd, name) < 0)
			goto failed;
	}
	tname = NULL;
	fsync(dfd); /* the rename is done; a failed sync loses nothing said */
	ok = true;
	goto out;
failed:
	tool_fail(c, "cannot write the skill into the writable source: %s; nothing "
		  "was written", strerror(errno));
cleanup:
	if (tfd >= 0)
		close(tfd);
	tfd = -1;
	remove_tree(dfd, tname);
	tname = NULL;
out:
	if (tfd >= 0)
		close(tfd);
	close(dfd);
	return ok;
}

/* ---- the tool ---- */

void tool_learn_skill(struct call *c, json_t *args)
{
	const char *name, *desc, *body;
	size_t body_len;
	if (!tool_arg_string(c, args, "name", true, false, &name, NULL) ||
	    !tool_arg_string(c, args, "description", true, false, &desc, NULL) ||
	    !tool_arg_string(c, args, "body", true, false, &body, &body_len))
		return;
	json_t *tools = json_object_get(args, "allowed_tools");
	json_t *files = json_object_get(args, "files");
	if (!skill_name_valid(name)) {
		char *q = skill_quote(name);
		if (q)
			tool_fail(c, "argument 'name' must be 1 to 64 lower-case letters, "
				  "digits and single hyphens (e.g. 'sum-csv'), got %s", q);
		else
			c->oom = true;
		free(q);
		return;
	}
	if (!*desc || strlen(desc) > LEARN_DESCRIPTION_MAX || has_control(desc)) {
		tool_fail(c, "argument 'description' must be one line of 1 to %d bytes, "
			  "without control characters", LEARN_DESCRIPTION_MAX);
		return;
	}
	if (strspn(body, " \t\r\n") == body_len) {
		tool_fail(c, "argument 'body' is empty; a skill needs instructions");
		return;
	}
	if (!check_tools(c, tools) || !check_files(c, files))
		return;
	if (!c->ctx->learn_dir) {
		tool_fail(c, "no source is writable (sources[].writable)");
		return;
	}
	if (!c->ctx->catalog) {
		tool_fail(c, "the catalogue is not known here; nothing was written");
		return;
	}
	if (name_taken(c->ctx->catalog, name)) {
		tool_fail(c, "a skill named '%s' exists already; choose another name", name);
		return;
	}
	json_t *none = NULL;
	if (!tools || json_is_null(tools))
		tools = none = json_array();
	if (!tools) {
		c->oom = true;
		return;
	}
	struct buf md = {0};
	struct skill *s = build_skill_md(c, name, desc, tools, body, body_len, &md);
	if (s && write_skill(c, name, &md, files)) {
		tool_put(c, "learned skill '%s': SKILL.md (%zu bytes)", name, md.len);
		size_t nfiles = json_object_size(files);
		if (nfiles)
			tool_put(c, " and %zu other file%s", nfiles, nfiles == 1 ? "" : "s");
		tool_put(c, " written; allowed-tools: [");
		size_t i;
		json_t *v;
		json_array_foreach(tools, i, v)
			tool_put(c, "%s%s", i ? ", " : "", json_string_value(v));
		tool_put(c, "]. It is listed as skills/%s once the mount sees it "
			  "(within a second); a later run uses it when its "
			  "configuration attaches it or the run names it in "
			  "runs/<id>/skills.", name);
		for (size_t k = 0; k < s->warnings.n; k++)
			tool_put(c, "\nwarning: %s", s->warnings.items[k]);
	}
	skill_unref(s);
	buf_free(&md);
	json_decref(none);
}
