/* config: reads and validates the instance configuration (DESIGN.md
 * sections 3 and 9) with the libyaml document API. One file past 1,200
 * lines: every key is read with the same helpers and error conventions
 * below, which a split would have to share through a header of its own.
 *
 * Conventions of the reader:
 * - A key whose value is null (`key:`, `key: ~`) reads as absent: the
 *   default applies.
 * - An unknown key is a warning; a known key given twice is an error.
 * - skills.maxBytes and skills.listingMaxBytes fall back to their defaults
 *   when empty, non-numeric or <= 0 (section 3); that is a rule, not an
 *   error, so only a warning is recorded for a non-empty bad value.
 * - Trust of a source or a per-skill override: a missing or unknown level
 *   reads as untrusted (D2), with a warning for an unknown one, which can only
 *   narrow what a skill gets. skills.minTrustLevel is different: it is the
 *   floor, and reading an unknown floor as "untrusted" would widen the set of
 *   effective skills, so an unknown floor is an error.
 * - Relative paths (sources[].path, state, model.command[0] when it holds a
 *   '/') resolve against the config file's directory and are normalised
 *   lexically (".", ".." and repeated slashes removed; symlinks are not
 *   followed, the path need not exist).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yaml.h>

#include "buf.h"
#include "size.h"
#include "yamlbound.h"

/* A config file larger than this is refused (it is a few KiB in practice). */
#define CONFIG_MAX_FILE_BYTES (4L * 1024 * 1024)
/* Bounds on the file's shape, checked before the document is loaded: its
 * keys lie a few levels deep, and libyaml's cost grows with the square of
 * the nesting (100,000 '[' never finished). */
#define CONFIG_YAML_MAX_DEPTH 64
#define CONFIG_YAML_MAX_NODES 200000
#define CONFIG_YAML_MAX_ALIAS_BYTES (1024 * 1024)
/* Room for a full dotted key; names from the file are clipped in keys. */
#define KEY_MAX 256
/* The number of keys in a keys table (the *_keys arrays, one per mapping
 * read with get_fields; config_known_keys lists them all). */
#define KEYS_N(a) (sizeof (a) / sizeof *(a))
#define WORKERS_MAX 64
#define CONFIG_NAME_MAX 64

const char *const config_builtin_tools[] = {
	"bash", "python", "terminal", "read", "write", "edit", "glob", "grep",
	"webfetch", "run_skill", "learn_skill", "ask_user",
};
const size_t config_builtin_tools_n =
	sizeof config_builtin_tools / sizeof config_builtin_tools[0];

/* ---- paths ------------------------------------------------------------ */

/* Joins base and p (p wins when absolute) and normalises lexically.
 * Returns a new string or NULL on ENOMEM. */
static char *path_resolve(const char *base, const char *p)
{
	struct buf in = {0};
	if (p[0] != '/' && base) {
		if (buf_puts(&in, base) < 0 || buf_puts(&in, "/") < 0)
			goto oom;
	}
	if (buf_puts(&in, p) < 0)
		goto oom;

	/* Normalise in place: the output never outgrows the input. */
	char *s = in.data;
	size_t o = 0;
	for (size_t i = 0; s[i];) {
		while (s[i] == '/')
			i++;
		if (!s[i])
			break;
		size_t j = i;
		while (s[j] && s[j] != '/')
			j++;
		size_t len = j - i;
		if (len == 1 && s[i] == '.') {
			/* skip */
		} else if (len == 2 && s[i] == '.' && s[i + 1] == '.') {
			while (o > 0 && s[o - 1] != '/')
				o--;
			if (o > 0)
				o--; /* drop the slash before the component */
		} else {
			s[o++] = '/';
			memmove(s + o, s + i, len);
			o += len;
		}
		i = j;
	}
	if (o == 0)
		s[o++] = '/';
	s[o] = '\0';
	return s;
oom:
	buf_free(&in);
	return NULL;
}

/* The current directory as a new string, or NULL (errno set). */
static char *cwd_dup(void)
{
	return getcwd(NULL, 0);
}

char *config_path_join(const char *base, const char *p)
{
	return path_resolve(base, p);
}

char *config_path_absolute(const char *p)
{
	if (p[0] == '/')
		return path_resolve(NULL, p);
	char *cwd = cwd_dup();
	if (!cwd)
		return NULL;
	char *r = path_resolve(cwd, p);
	free(cwd);
	return r;
}

/* ---- the reader's context --------------------------------------------- */

struct ctx {
	const char *file;     /* name used in messages */
	const char *base_dir; /* absolute */
	yaml_document_t *doc;
	struct config *c;
	char *err;
};

static unsigned long line_of(const yaml_node_t *n)
{
	return n ? (unsigned long)n->start_mark.line + 1 : 0;
}

/* Records the first error: "file:line: key: message". Returns -1. */
__attribute__((format(printf, 4, 5)))
static int fail(struct ctx *x, const yaml_node_t *n, const char *key,
		const char *fmt, ...)
{
	if (x->err)
		return -1;
	struct buf b = {0};
	va_list ap;
	int r = buf_printf(&b, "%s:%lu: ", x->file, line_of(n));
	if (r == 0 && key && key[0])
		r = buf_printf(&b, "%s: ", key);
	if (r == 0) {
		va_start(ap, fmt);
		r = buf_vprintf(&b, fmt, ap);
		va_end(ap);
	}
	x->err = r == 0 ? buf_steal(&b, NULL) : NULL;
	buf_free(&b);
	if (!x->err)
		x->err = strdup("out of memory");
	return -1;
}

static int fail_oom(struct ctx *x)
{
	if (!x->err)
		x->err = strdup("out of memory");
	return -1;
}

/* Adds "file:line: message" to the warnings. Returns 0, or -1 on ENOMEM. */
__attribute__((format(printf, 3, 4)))
static int warn(struct ctx *x, const yaml_node_t *n, const char *fmt, ...)
{
	struct buf b = {0};
	va_list ap;
	int r = buf_printf(&b, "%s:%lu: ", x->file, line_of(n));
	if (r == 0) {
		va_start(ap, fmt);
		r = buf_vprintf(&b, fmt, ap);
		va_end(ap);
	}
	char *s = r == 0 ? buf_steal(&b, NULL) : NULL;
	buf_free(&b);
	if (!s || strlist_add_owned(&x->c->warnings, s) < 0)
		return fail_oom(x);
	return 0;
}

/* Ends a key clipped by snprintf with "..." so a message shows the cut. */
static const char *key_clip(char *dst, int r)
{
	if (r >= KEY_MAX)
		memcpy(dst + KEY_MAX - 4, "...", 4);
	return dst;
}

/* "prefix.name" (or "name" at the top), clipped to KEY_MAX. */
static const char *key_join(char *dst, const char *prefix, const char *name)
{
	if (prefix && prefix[0])
		return key_clip(dst, snprintf(dst, KEY_MAX, "%s.%.64s", prefix, name));
	return key_clip(dst, snprintf(dst, KEY_MAX, "%.64s", name));
}

/* "prefix[i]", clipped to KEY_MAX. */
static const char *key_index(char *dst, const char *prefix, size_t i)
{
	return key_clip(dst, snprintf(dst, KEY_MAX, "%s[%zu]", prefix, i));
}

static yaml_node_t *node_at(struct ctx *x, int idx)
{
	return yaml_document_get_node(x->doc, idx);
}

static const char *scalar_value(const yaml_node_t *n)
{
	return (const char *)n->data.scalar.value;
}

static bool is_null(const yaml_node_t *n)
{
	if (!n)
		return true;
	if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return false;
	const char *v = scalar_value(n);
	return !strcmp(v, "") || !strcmp(v, "~") || !strcmp(v, "null") ||
	       !strcmp(v, "Null") || !strcmp(v, "NULL");
}

static const char *node_kind(const yaml_node_t *n)
{
	switch (n->type) {
	case YAML_MAPPING_NODE:
		return "a mapping";
	case YAML_SEQUENCE_NODE:
		return "a list";
	default:
		return is_null(n) ? "nothing" : "a scalar";
	}
}

/* A string scalar without NUL bytes; empty allowed only when allow_empty. */
static int get_str(struct ctx *x, const yaml_node_t *n, const char *key,
		   bool allow_empty, const char **out)
{
	if (n->type != YAML_SCALAR_NODE || (is_null(n) && !allow_empty))
		return fail(x, n, key, "expected a string, got %s", node_kind(n));
	if (strlen(scalar_value(n)) != n->data.scalar.length)
		return fail(x, n, key, "string contains a NUL byte");
	if (!allow_empty && n->data.scalar.length == 0)
		return fail(x, n, key, "expected a non-empty string");
	*out = scalar_value(n);
	return 0;
}

/* Parses a whole decimal integer; false when s is not one or overflows. */
static bool parse_long(const char *s, long *out)
{
	while (*s == ' ' || *s == '\t')
		s++;
	if (!*s)
		return false;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s)
		return false;
	while (*end == ' ' || *end == '\t')
		end++;
	if (*end)
		return false;
	*out = v;
	return true;
}

static int get_long(struct ctx *x, const yaml_node_t *n, const char *key,
		    long min, long max, long *out)
{
	long v;
	if (n->type != YAML_SCALAR_NODE)
		return fail(x, n, key, "expected an integer, got %s", node_kind(n));
	if (!parse_long(scalar_value(n), &v))
		return fail(x, n, key, "expected an integer, got '%.64s'", scalar_value(n));
	if (v < min || v > max)
		return fail(x, n, key, "expected an integer from %ld to %ld, got %ld",
			    min, max, v);
	*out = v;
	return 0;
}

static int get_int(struct ctx *x, const yaml_node_t *n, const char *key,
		   int min, int max, int *out)
{
	long v;
	if (get_long(x, n, key, min, max, &v) < 0)
		return -1;
	*out = (int)v;
	return 0;
}

static int get_bool(struct ctx *x, const yaml_node_t *n, const char *key, bool *out)
{
	static const char *const yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES",
					  "on", "On", "ON"};
	static const char *const no[] = {"false", "False", "FALSE", "no", "No", "NO",
					 "off", "Off", "OFF"};
	if (n->type == YAML_SCALAR_NODE) {
		for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
			if (!strcmp(scalar_value(n), yes[i])) {
				*out = true;
				return 0;
			}
			if (!strcmp(scalar_value(n), no[i])) {
				*out = false;
				return 0;
			}
		}
		return fail(x, n, key, "expected true or false, got '%.64s'",
			    scalar_value(n));
	}
	return fail(x, n, key, "expected true or false, got %s", node_kind(n));
}

/* Reads a mapping with a fixed set of keys: out[i] is the value of names[i],
 * or NULL when absent or null. Unknown keys are warnings; a repeated known
 * key is an error. */
static int get_fields(struct ctx *x, const yaml_node_t *n, const char *key,
		      const char *const *names, size_t nnames, yaml_node_t **out)
{
	char k[KEY_MAX];
	for (size_t i = 0; i < nnames; i++)
		out[i] = NULL;
	if (n->type != YAML_MAPPING_NODE)
		return fail(x, n, key, "expected a mapping, got %s", node_kind(n));
	bool seen[16] = {false}; /* every caller names at most 10 keys */
	if (nnames > sizeof seen / sizeof *seen)
		return fail(x, n, key, "internal error: too many keys");
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	     p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = node_at(x, p->key);
		yaml_node_t *vn = node_at(x, p->value);
		const char *name;
		if (!kn || !vn)
			return fail(x, n, key, "malformed mapping");
		if (kn->type != YAML_SCALAR_NODE)
			return fail(x, kn, key, "expected a string key, got %s", node_kind(kn));
		name = scalar_value(kn);
		size_t i = 0;
		while (i < nnames && strcmp(names[i], name) != 0)
			i++;
		if (i == nnames) {
			if (warn(x, kn, "unknown key '%s'", key_join(k, key, name)) < 0)
				return -1;
			continue;
		}
		if (seen[i])
			return fail(x, kn, key_join(k, key, name), "key given twice");
		seen[i] = true;
		out[i] = is_null(vn) ? NULL : vn;
	}
	return 0;
}

/* A list node, or an error naming the key. */
static int want_seq(struct ctx *x, const yaml_node_t *n, const char *key)
{
	if (n->type != YAML_SEQUENCE_NODE)
		return fail(x, n, key, "expected a list, got %s", node_kind(n));
	return 0;
}

static size_t seq_len(const yaml_node_t *n)
{
	return (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
}

/* Item i of a list node (NULL only for a malformed document). */
static yaml_node_t *seq_item(struct ctx *x, const yaml_node_t *n, size_t i)
{
	return node_at(x, n->data.sequence.items.start[i]);
}

static char *str_lower(const char *s)
{
	char *r = strdup(s);
	if (r)
		for (char *p = r; *p; p++)
			*p = (char)tolower((unsigned char)*p);
	return r;
}

/* A trust level where D2 applies: unknown reads as untrusted, warned. */
static int get_trust_lenient(struct ctx *x, const yaml_node_t *n, const char *key,
			     enum trust *out)
{
	*out = TRUST_UNTRUSTED;
	if (!n)
		return 0; /* missing: untrusted */
	if (n->type != YAML_SCALAR_NODE)
		return fail(x, n, key, "expected a trust level, got %s", node_kind(n));
	if (!trust_parse(scalar_value(n), out))
		return warn(x, n, "%s: unknown trust level '%.64s', read as untrusted",
			    key, scalar_value(n));
	return 0;
}

/* ---- sections ---------------------------------------------------------- */

static int add_source(struct config *c, char *abs, enum trust t, bool writable,
		      bool recursive)
{
	struct source *s = realloc(c->sources, (c->nsources + 1) * sizeof *s);
	if (!s) {
		free(abs);
		return -1;
	}
	c->sources = s;
	s[c->nsources] = (struct source){ .path = abs, .trust = t, .writable = writable,
				      .recursive = recursive };
	c->nsources++;
	return 0;
}

static const char *const sources_keys[] = {"path", "trust", "writable", "recursive",
					   "fingerprint"};

/* Whether s is a pin as sources[].fingerprint takes it: "sha256:" and 64
 * lower-case hex digits (what `skillfs fingerprint` prints). */
static bool fingerprint_ok(const char *s)
{
	if (strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 64)
		return false;
	for (s += 7; *s; s++)
		if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
			return false;
	return true;
}

static int parse_sources(struct ctx *x, const yaml_node_t *n)
{
	yaml_node_t *f[KEYS_N(sources_keys)];
	char k[KEY_MAX], kk[KEY_MAX];
	if (want_seq(x, n, "sources") < 0)
		return -1;
	for (size_t i = 0; i < seq_len(n); i++) {
		yaml_node_t *item = seq_item(x, n, i);
		const char *path, *pin = NULL;
		enum trust t;
		key_index(k, "sources", i);
		if (!item)
			return fail(x, n, k, "malformed list");
		bool writable = false, recursive = false;
		if (get_fields(x, item, k, sources_keys, KEYS_N(sources_keys), f) < 0)
			return -1;
		if (!f[0])
			return fail(x, item, key_join(kk, k, "path"), "missing");
		if (get_str(x, f[0], key_join(kk, k, "path"), false, &path) < 0)
			return -1;
		if (get_trust_lenient(x, f[1], key_join(kk, k, "trust"), &t) < 0)
			return -1;
		if (f[2] && get_bool(x, f[2], key_join(kk, k, "writable"), &writable) < 0)
			return -1;
		if (f[3] && get_bool(x, f[3], key_join(kk, k, "recursive"), &recursive) < 0)
			return -1;
		/* A pin that cannot be read is an error, never "no pin": the
		 * source would load unchecked. */
		if (f[4] && get_str(x, f[4], key_join(kk, k, "fingerprint"), false, &pin) < 0)
			return -1;
		if (pin && !fingerprint_ok(pin))
			return fail(x, f[4], key_join(kk, k, "fingerprint"),
				    "expected sha256: and 64 lower-case hex digits (as `skillfs "
				    "fingerprint DIR` prints), got '%.80s'", pin);
		char *abs = path_resolve(x->base_dir, path);
		if (!abs || add_source(x->c, abs, t, writable, recursive) < 0)
			return fail_oom(x);
		if (pin && !(x->c->sources[x->c->nsources - 1].fingerprint = strdup(pin)))
			return fail_oom(x);
	}
	return 0;
}

/* skills.maxBytes / listingMaxBytes: the section 3 fallback rule. */
static int get_budget(struct ctx *x, const yaml_node_t *n, const char *key,
		      long dflt, long *out)
{
	long v;
	*out = dflt;
	if (!n)
		return 0; /* absent or empty: the default, silently */
	if (n->type == YAML_SCALAR_NODE && parse_long(scalar_value(n), &v) && v > 0) {
		*out = v;
		return 0;
	}
	if (n->type == YAML_SCALAR_NODE && n->data.scalar.length == 0)
		return 0; /* quoted empty string: still empty */
	if (n->type == YAML_SCALAR_NODE)
		return warn(x, n, "%s: '%.64s' is not a positive integer; using the default %ld",
			    key, scalar_value(n), dflt);
	return warn(x, n, "%s: %s is not a positive integer; using the default %ld",
		    key, node_kind(n), dflt);
}

static int parse_str_list(struct ctx *x, const yaml_node_t *n, const char *key,
			  struct strlist *out)
{
	char k[KEY_MAX];
	const char *s = NULL;
	if (want_seq(x, n, key) < 0)
		return -1;
	for (size_t i = 0; i < seq_len(n); i++) {
		yaml_node_t *item = seq_item(x, n, i);
		if (!item)
			return fail(x, n, key, "malformed list");
		if (get_str(x, item, key_index(k, key, i), false, &s) < 0)
			return -1;
		if (strlist_add(out, s) < 0)
			return fail_oom(x);
	}
	return 0;
}

/* One entry of a mapping with string keys: kn the key node, name its
 * text, k "<key>.<name>", vn the value (a null node included). */
typedef int (*pair_fn)(struct ctx *x, const yaml_node_t *kn, const char *name,
		       const char *k, yaml_node_t *vn, void *arg);

/* Calls fn for each entry of the mapping n at key (what the mapping maps,
 * for the message when n is not one: "skill to trust level"). Returns 0,
 * or -1 at the first failure (fn's, or a key that is not a string). */
static int each_pair(struct ctx *x, const yaml_node_t *n, const char *key,
		     const char *what, pair_fn fn, void *arg)
{
	char k[KEY_MAX];
	if (n->type != YAML_MAPPING_NODE)
		return fail(x, n, key, "expected a mapping of %s, got %s", what, node_kind(n));
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	     p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = node_at(x, p->key), *vn = node_at(x, p->value);
		const char *name;
		if (!kn || !vn)
			return fail(x, n, key, "malformed mapping");
		if (get_str(x, kn, key, false, &name) < 0 ||
		    fn(x, kn, name, key_join(k, key, name), vn, arg) < 0)
			return -1;
	}
	return 0;
}

static int trust_entry(struct ctx *x, const yaml_node_t *kn, const char *skill,
		       const char *k, yaml_node_t *vn, void *arg)
{
	(void)arg;
	struct config *c = x->c;
	enum trust t;
	for (size_t i = 0; i < c->ntrust_overrides; i++)
		if (!strcmp(c->trust_overrides[i].skill, skill))
			return fail(x, kn, k, "key given twice");
	if (get_trust_lenient(x, is_null(vn) ? NULL : vn, k, &t) < 0)
		return -1;
	struct trust_override *o = realloc(c->trust_overrides,
					   (c->ntrust_overrides + 1) * sizeof *o);
	if (!o)
		return fail_oom(x);
	c->trust_overrides = o;
	o[c->ntrust_overrides].skill = strdup(skill);
	if (!o[c->ntrust_overrides].skill)
		return fail_oom(x);
	o[c->ntrust_overrides].trust = t;
	c->ntrust_overrides++;
	return 0;
}

static int parse_trust_map(struct ctx *x, const yaml_node_t *n)
{
	return each_pair(x, n, "skills.trust", "skill to trust level", trust_entry, NULL);
}

static const char *const skills_keys[] = {"maxBytes", "listingMaxBytes",
		"execution_mode", "minTrustLevel", "disabled", "trust", "acknowledged"};

static int parse_skills(struct ctx *x, const yaml_node_t *n)
{
	yaml_node_t *f[KEYS_N(skills_keys)];
	struct config *c = x->c;
	const char *s;
	if (get_fields(x, n, "skills", skills_keys, KEYS_N(skills_keys), f) < 0)
		return -1;
	if (get_budget(x, f[0], "skills.maxBytes", CONFIG_DEFAULT_MAX_BYTES,
		       &c->max_bytes) < 0 ||
	    get_budget(x, f[1], "skills.listingMaxBytes",
		       CONFIG_DEFAULT_LISTING_MAX_BYTES, &c->listing_max_bytes) < 0)
		return -1;
	if (f[2]) {
		if (f[2]->type != YAML_SCALAR_NODE)
			return fail(x, f[2], "skills.execution_mode",
				    "expected 'inline' or 'subagent', got %s", node_kind(f[2]));
		s = scalar_value(f[2]);
		if (!strcmp(s, "inline"))
			c->execution_mode = EXEC_INLINE;
		else if (!strcmp(s, "subagent"))
			c->execution_mode = EXEC_SUBAGENT;
		else
			return fail(x, f[2], "skills.execution_mode",
				    "expected 'inline' or 'subagent', got '%.64s'", s);
	}
	if (f[3]) {
		/* The floor: unknown is an error, see the top of this file. */
		if (f[3]->type != YAML_SCALAR_NODE ||
		    !trust_parse(scalar_value(f[3]), &c->min_trust))
			return fail(x, f[3], "skills.minTrustLevel",
				    "expected untrusted, community, verified or first_party, got '%.64s'",
				    f[3]->type == YAML_SCALAR_NODE ? scalar_value(f[3])
								   : node_kind(f[3]));
	}
	if (f[4] && parse_str_list(x, f[4], "skills.disabled", &c->disabled) < 0)
		return -1;
	if (f[5] && parse_trust_map(x, f[5]) < 0)
		return -1;
	if (f[6] && parse_str_list(x, f[6], "skills.acknowledged", &c->acknowledged) < 0)
		return -1;
	return 0;
}

static bool is_builtin_tool(const char *name)
{
	for (size_t i = 0; i < config_builtin_tools_n; i++)
		if (!strcmp(config_builtin_tools[i], name))
			return true;
	return false;
}

static int fail_unknown_tool(struct ctx *x, const yaml_node_t *n, const char *key,
			     const char *name)
{
	struct buf known = {0};
	for (size_t i = 0; i < config_builtin_tools_n; i++)
		if (buf_printf(&known, "%s%s", i ? ", " : "", config_builtin_tools[i]) < 0) {
			buf_free(&known);
			return fail_oom(x);
		}
	fail(x, n, key, "unknown tool '%.64s' (built-in tools: %s)", name, known.data);
	buf_free(&known);
	return -1;
}

/* tools.registered (approval false: each a built-in tool) or tools.approval
 * (each already registered): lower-cased names; a repeated name is kept once
 * with a warning. */
static int parse_tool_list(struct ctx *x, const yaml_node_t *n, const char *key,
			   struct strlist *out, bool approval)
{
	char k[KEY_MAX];
	const char *s;
	if (want_seq(x, n, key) < 0)
		return -1;
	for (size_t i = 0; i < seq_len(n); i++) {
		yaml_node_t *item = seq_item(x, n, i);
		if (!item)
			return fail(x, n, key, "malformed list");
		key_index(k, key, i);
		if (get_str(x, item, k, false, &s) < 0)
			return -1;
		char *name = str_lower(s);
		if (!name)
			return fail_oom(x);
		int bad = 0;
		if (!approval && !is_builtin_tool(name))
			bad = fail_unknown_tool(x, item, k, s);
		else if (approval && !strlist_has(&x->c->registered_tools, name))
			bad = fail(x, item, k, "tool '%.64s' is not in tools.registered", s);
		else if (strlist_has(out, name))
			bad = warn(x, item, "%s: tool '%.64s' listed twice", k, name);
		else if (strlist_add(out, name) < 0)
			bad = fail_oom(x);
		free(name);
		if (bad < 0)
			return -1;
	}
	return 0;
}

static int set_builtin_tools(struct config *c)
{
	strlist_free(&c->registered_tools);
	for (size_t i = 0; i < config_builtin_tools_n; i++)
		if (strlist_add(&c->registered_tools, config_builtin_tools[i]) < 0)
			return -1;
	return 0;
}

static int dup_field(struct ctx *x, const yaml_node_t *n, const char *key, char **out);

/* tools.limits.<tool>: {timeout: seconds, output_bytes: n}. */
static const char *const limit_entry_keys[] = {"timeout", "output_bytes"};

static int limit_entry(struct ctx *x, const yaml_node_t *kn, const char *name,
		       const char *k, yaml_node_t *vn, void *arg)
{
	(void)arg;
	struct tools_config *t = &x->c->tools;
	char *tool = str_lower(name);
	if (!tool)
		return fail_oom(x);
	int bad = 0;
	if (!is_builtin_tool(tool))
		bad = fail_unknown_tool(x, kn, k, name);
	for (size_t i = 0; !bad && i < t->nlimits; i++)
		if (!strcmp(t->limits[i].tool, tool))
			bad = fail(x, kn, k, "key given twice");
	struct tool_limit *l = bad ? NULL : realloc(t->limits, (t->nlimits + 1) * sizeof *l);
	if (!bad && !l)
		bad = fail_oom(x);
	if (bad) {
		free(tool);
		return -1;
	}
	t->limits = l;
	l = &t->limits[t->nlimits++];
	*l = (struct tool_limit){ .tool = tool };
	if (is_null(vn))
		return 0;
	yaml_node_t *f[KEYS_N(limit_entry_keys)];
	char kk[KEY_MAX];
	if (get_fields(x, vn, k, limit_entry_keys, KEYS_N(limit_entry_keys), f) < 0 ||
	    (f[0] && get_int(x, f[0], key_join(kk, k, "timeout"), 1, 86400, &l->timeout) < 0) ||
	    (f[1] && get_long(x, f[1], key_join(kk, k, "output_bytes"), 1, 64L << 20,
			      &l->output_bytes) < 0))
		return -1;
	return 0;
}

/* tools.env.<NAME>: value, passed to tool processes as NAME=value. */
static int env_entry(struct ctx *x, const yaml_node_t *kn, const char *name,
		     const char *k, yaml_node_t *vn, void *arg)
{
	(void)arg;
	const char *val = "";
	bool ok = isalpha((unsigned char)name[0]) || name[0] == '_';
	for (const char *q = name; ok && *q; q++)
		ok = isalnum((unsigned char)*q) || *q == '_';
	if (!ok)
		return fail(x, kn, k, "not a variable name (letters, digits, _)");
	if (!strcmp(name, "PATH") || !strcmp(name, "HOME"))
		return fail(x, kn, k, "%s is set by skillfs for each tool", name);
	if (!is_null(vn) && get_str(x, vn, k, true, &val) < 0)
		return -1;
	for (size_t i = 0; i < x->c->tools.env.n; i++) {
		const char *e = x->c->tools.env.items[i];
		if (!strncmp(e, name, strlen(name)) && e[strlen(name)] == '=')
			return fail(x, kn, k, "key given twice");
	}
	if (strlist_addf(&x->c->tools.env, "%s=%s", name, val) < 0)
		return fail_oom(x);
	return 0;
}

/* A byte count at key: an integer or a size such as "1MiB" (size_parse),
 * at most max. */
static int get_size(struct ctx *x, const yaml_node_t *n, const char *key,
		    uint64_t max, uint64_t *out)
{
	if (n->type != YAML_SCALAR_NODE)
		return fail(x, n, key, "expected a size, got %s", node_kind(n));
	if (size_parse(scalar_value(n), max, out) < 0)
		return fail(x, n, key, "expected a positive number of bytes of at most "
			    "%llu, optionally with a unit B, KiB, MiB or GiB (e.g. "
			    "1MiB), got '%.64s'", (unsigned long long)max, scalar_value(n));
	return 0;
}

/* tools.webfetch: {allow_private, max_text, max_download}. */
static const char *const tool_webfetch_keys[] = {"allow_private", "max_text", "max_download"};

static int parse_tool_webfetch(struct ctx *x, const yaml_node_t *n)
{
	yaml_node_t *f[KEYS_N(tool_webfetch_keys)];
	struct webfetch_config *w = &x->c->tools.webfetch;
	if (get_fields(x, n, "tools.webfetch", tool_webfetch_keys, KEYS_N(tool_webfetch_keys), f) < 0)
		return -1;
	if ((f[0] && get_bool(x, f[0], "tools.webfetch.allow_private",
			      &w->allow_private) < 0) ||
	    (f[1] && get_size(x, f[1], "tools.webfetch.max_text", (uint64_t)64 << 20,
			      &w->max_text) < 0) ||
	    (f[2] && get_size(x, f[2], "tools.webfetch.max_download",
			      (uint64_t)1 << 30, &w->max_download) < 0))
		return -1;
	return 0;
}

/* Whether name can be a program of tools.terminal.commands: a bare file
 * name (no '/', no leading '-' or '.') of letters, digits and . _ + -. */
static bool terminal_name_ok(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > 64 || name[0] == '-' || name[0] == '.')
		return false;
	for (const char *q = name; *q; q++)
		if (!isalnum((unsigned char)*q) && !strchr("._+-", *q))
			return false;
	return true;
}

/* tools.terminal: {commands: [program, ...]}: the programs the terminal
 * tool may start (replacing the default list); a repeated one is kept once
 * with a warning. */
static const char *const tool_terminal_keys[] = {"commands"};

static int parse_tool_terminal(struct ctx *x, const yaml_node_t *n)
{
	const char *key = "tools.terminal.commands";
	yaml_node_t *f[KEYS_N(tool_terminal_keys)];
	char k[KEY_MAX];
	struct strlist *out = &x->c->tools.terminal_commands;
	if (get_fields(x, n, "tools.terminal", tool_terminal_keys, KEYS_N(tool_terminal_keys), f) < 0)
		return -1;
	if (!f[0])
		return 0;
	if (want_seq(x, f[0], key) < 0)
		return -1;
	strlist_free(out);
	if (seq_len(f[0]) > CONFIG_TERMINAL_COMMANDS_MAX)
		return fail(x, f[0], key, "at most %d programs", CONFIG_TERMINAL_COMMANDS_MAX);
	for (size_t i = 0; i < seq_len(f[0]); i++) {
		yaml_node_t *item = seq_item(x, f[0], i);
		const char *s;
		if (!item)
			return fail(x, f[0], key, "malformed list");
		key_index(k, key, i);
		if (get_str(x, item, k, false, &s) < 0)
			return -1;
		if (!terminal_name_ok(s))
			return fail(x, item, k, "'%.64s' is not a program name: give a bare name "
				    "(letters, digits, . _ + -; no '/'), which is looked up on "
				    "the sandbox's PATH", s);
		if (strlist_has(out, s)) {
			if (warn(x, item, "%s: '%s' listed twice", k, s) < 0)
				return -1;
		} else if (strlist_add(out, s) < 0) {
			return fail_oom(x);
		}
	}
	return 0;
}

static const char *const tools_keys[] = {"registered", "approval", "sandbox",
		"sandbox_program", "network", "user", "env", "limits", "webfetch", "terminal"};

static int parse_tools(struct ctx *x, const yaml_node_t *n)
{
	enum { NF = sizeof tools_keys / sizeof *tools_keys };
	yaml_node_t *f[NF];
	struct config *c = x->c;
	if (get_fields(x, n, "tools", tools_keys, KEYS_N(tools_keys), f) < 0)
		return -1;
	if (f[0]) {
		strlist_free(&c->registered_tools);
		if (parse_tool_list(x, f[0], "tools.registered", &c->registered_tools,
				    false) < 0)
			return -1;
	}
	/* Approval names are checked against the final registered list. */
	if (f[1] && parse_tool_list(x, f[1], "tools.approval", &c->approval_tools,
				    true) < 0)
		return -1;
	if (f[2]) {
		const char *s;
		if (get_str(x, f[2], "tools.sandbox", false, &s) < 0)
			return -1;
		if (!strcmp(s, "bwrap"))
			c->tools.sandbox = SANDBOX_BWRAP;
		else if (!strcmp(s, "none"))
			c->tools.sandbox = SANDBOX_NONE;
		else
			return fail(x, f[2], "tools.sandbox",
				    "expected 'bwrap' or 'none', got '%.64s'", s);
	}
	if (dup_field(x, f[3], "tools.sandbox_program", &c->tools.sandbox_program) < 0)
		return -1;
	if (c->tools.sandbox_program && c->tools.sandbox_program[0] != '/' &&
	    strchr(c->tools.sandbox_program, '/')) {
		char *abs = path_resolve(x->base_dir, c->tools.sandbox_program);
		if (!abs)
			return fail_oom(x);
		free(c->tools.sandbox_program);
		c->tools.sandbox_program = abs;
	}
	if (f[4] && get_bool(x, f[4], "tools.network", &c->tools.network) < 0)
		return -1;
	if (dup_field(x, f[5], "tools.user", &c->tools.user) < 0)
		return -1;
	if ((f[6] && each_pair(x, f[6], "tools.env", "variable to value", env_entry, NULL) < 0) ||
	    (f[7] && each_pair(x, f[7], "tools.limits", "tool to limits", limit_entry, NULL) < 0) ||
	    (f[8] && parse_tool_webfetch(x, f[8]) < 0) ||
	    (f[9] && parse_tool_terminal(x, f[9]) < 0))
		return -1;
	return 0;
}

static int parse_command(struct ctx *x, const yaml_node_t *n, struct strlist *out)
{
	const char *key = "model.command";
	if (n->type == YAML_SCALAR_NODE) {
		const char *s;
		if (get_str(x, n, key, false, &s) < 0)
			return -1;
		const char *ws = " \t\r\n";
		for (s += strspn(s, ws); *s; s += strspn(s, ws)) {
			size_t len = strcspn(s, ws);
			if (strlist_add_owned(out, strndup(s, len)) < 0)
				return fail_oom(x);
			s += len;
		}
	} else if (n->type == YAML_SEQUENCE_NODE) {
		if (parse_str_list(x, n, key, out) < 0)
			return -1;
	} else {
		return fail(x, n, key, "expected a list of strings or a string, got %s",
			    node_kind(n));
	}
	if (out->n == 0)
		return fail(x, n, key, "expected a program to run, got nothing");
	char *argv0 = out->items[0];
	if (argv0[0] != '/' && strchr(argv0, '/')) {
		char *abs = path_resolve(x->base_dir, argv0);
		if (!abs)
			return fail_oom(x);
		free(argv0);
		out->items[0] = abs;
	}
	return 0;
}

static int dup_field(struct ctx *x, const yaml_node_t *n, const char *key, char **out)
{
	const char *s;
	if (!n)
		return 0;
	if (get_str(x, n, key, false, &s) < 0)
		return -1;
	char *d = strdup(s);
	if (!d)
		return fail_oom(x);
	free(*out);
	*out = d;
	return 0;
}

static const char *const model_keys[] = {"provider", "command", "base_url",
		"model", "api_key_env", "timeout", "stream"};

static int parse_model(struct ctx *x, const yaml_node_t *n)
{
	yaml_node_t *f[KEYS_N(model_keys)];
	struct model_config *m = &x->c->model;
	if (get_fields(x, n, "model", model_keys, KEYS_N(model_keys), f) < 0)
		return -1;
	if (dup_field(x, f[0], "model.provider", &m->provider) < 0)
		return -1;
	if (strcmp(m->provider, "echo") && strcmp(m->provider, "command") &&
	    strcmp(m->provider, "openai"))
		return fail(x, f[0], "model.provider",
			    "expected 'echo', 'command' or 'openai', got '%.64s'", m->provider);
	if (f[1] && parse_command(x, f[1], &m->command) < 0)
		return -1;
	if (dup_field(x, f[2], "model.base_url", &m->base_url) < 0 ||
	    dup_field(x, f[3], "model.model", &m->model) < 0 ||
	    dup_field(x, f[4], "model.api_key_env", &m->api_key_env) < 0)
		return -1;
	if (m->base_url && strncmp(m->base_url, "http://", 7) &&
	    strncmp(m->base_url, "https://", 8))
		return fail(x, f[2], "model.base_url",
			    "expected an http:// or https:// URL, got '%.64s'", m->base_url);
	if (f[5] && get_int(x, f[5], "model.timeout", 1, INT_MAX, &m->timeout) < 0)
		return -1;
	bool stream = true;
	if (f[6] && get_bool(x, f[6], "model.stream", &stream) < 0)
		return -1;
	m->stream_off = !stream;
	if (!strcmp(m->provider, "command") && m->command.n == 0)
		return fail(x, f[0], "model.command",
			    "required when model.provider is 'command'");
	if (!strcmp(m->provider, "openai") && !m->base_url)
		return fail(x, f[0], "model.base_url",
			    "required when model.provider is 'openai'");
	return 0;
}

/* runs.budget: positive integers; stored_bytes also as a size ("64MiB"). */
static const char *const runs_budget_keys[] = {"model_calls", "tool_calls_per_turn",
					    "subagents", "depth", "seconds",
					    "stored_bytes"};

static int parse_runs_budget(struct ctx *x, const yaml_node_t *n)
{
	yaml_node_t *f[KEYS_N(runs_budget_keys)];
	struct run_budget *b = &x->c->budget;
	long *counts[] = {&b->model_calls, &b->tool_calls_per_turn, &b->subagents,
			  &b->depth, &b->seconds};
	char k[KEY_MAX];
	if (get_fields(x, n, "runs.budget", runs_budget_keys, KEYS_N(runs_budget_keys), f) < 0)
		return -1;
	for (size_t i = 0; i < 5; i++)
		if (f[i] && get_long(x, f[i], key_join(k, "runs.budget", runs_budget_keys[i]), 1,
				     LONG_MAX, counts[i]) < 0)
			return -1;
	if (f[5]) {
		uint64_t v;
		if (f[5]->type != YAML_SCALAR_NODE)
			return fail(x, f[5], "runs.budget.stored_bytes",
				    "expected a size, got %s", node_kind(f[5]));
		if (size_parse(scalar_value(f[5]), INT64_MAX, &v) < 0)
			return fail(x, f[5], "runs.budget.stored_bytes",
				    "expected a positive number of bytes, optionally "
				    "with a unit B, KiB, MiB, GiB or TiB (e.g. 64MiB), "
				    "got '%.64s'", scalar_value(f[5]));
		b->stored_bytes = (int64_t)v;
	}
	return 0;
}

/* runs.workdir_roots: a list of directories (relative ones against the
 * config file's directory), each kept once. */
static int parse_workdir_roots(struct ctx *x, const yaml_node_t *n)
{
	char k[KEY_MAX];
	if (want_seq(x, n, "runs.workdir_roots") < 0)
		return -1;
	for (size_t i = 0; i < seq_len(n); i++) {
		yaml_node_t *item = seq_item(x, n, i);
		const char *path;
		key_index(k, "runs.workdir_roots", i);
		if (!item)
			return fail(x, n, k, "malformed list");
		if (get_str(x, item, k, false, &path) < 0)
			return -1;
		char *abs = path_resolve(x->base_dir, path);
		if (!abs)
			return fail_oom(x);
		if (strlist_has(&x->c->workdir_roots, abs)) {
			free(abs);
			continue;
		}
		if (strlist_add_owned(&x->c->workdir_roots, abs) < 0)
			return fail_oom(x);
	}
	return 0;
}

/* runs.keep: {days: a positive number (fractions too), count: a positive
 * integer}, either or both. */
static const char *const runs_keep_keys[] = {"days", "count"};

static int parse_runs_keep(struct ctx *x, const yaml_node_t *n)
{
	yaml_node_t *f[KEYS_N(runs_keep_keys)];
	struct run_keep *k = &x->c->keep;
	if (get_fields(x, n, "runs.keep", runs_keep_keys, KEYS_N(runs_keep_keys), f) < 0)
		return -1;
	if (f[0]) {
		const char *v = f[0]->type == YAML_SCALAR_NODE ? scalar_value(f[0]) : NULL;
		char *end = NULL;
		errno = 0;
		double d = v && *v ? strtod(v, &end) : 0;
		if (!v || !*v || errno || *end || !(d > 0) || d > 1e6)
			return fail(x, f[0], "runs.keep.days",
				    "expected a number of days above 0 (e.g. 30 or 0.5), got %s",
				    v ? v : node_kind(f[0]));
		k->days = d;
	}
	if (f[1] && get_long(x, f[1], "runs.keep.count", 1, LONG_MAX, &k->count) < 0)
		return -1;
	return 0;
}

static const char *const runs_keys[] = {"workers", "max_turns", "prompt_max_bytes",
					    "budget", "workdir_roots", "keep"};

static int parse_runs(struct ctx *x, const yaml_node_t *n)
{
	yaml_node_t *f[KEYS_N(runs_keys)];
	struct config *c = x->c;
	if (get_fields(x, n, "runs", runs_keys, KEYS_N(runs_keys), f) < 0)
		return -1;
	if (f[5] && parse_runs_keep(x, f[5]) < 0)
		return -1;
	if (f[0] && get_int(x, f[0], "runs.workers", 1, WORKERS_MAX, &c->workers) < 0)
		return -1;
	if (f[1] && get_int(x, f[1], "runs.max_turns", 1, INT_MAX, &c->max_turns) < 0)
		return -1;
	if (f[2] && get_long(x, f[2], "runs.prompt_max_bytes", 1, LONG_MAX,
			     &c->prompt_max_bytes) < 0)
		return -1;
	if (f[3] && parse_runs_budget(x, f[3]) < 0)
		return -1;
	if (f[4] && parse_workdir_roots(x, f[4]) < 0)
		return -1;
	return 0;
}

static int parse_state(struct ctx *x, const yaml_node_t *n)
{
	const char *s;
	if (get_str(x, n, "state", false, &s) < 0)
		return -1;
	free(x->c->state_path);
	x->c->state_path = path_resolve(x->base_dir, s);
	return x->c->state_path ? 0 : fail_oom(x);
}

/* 1-64 of A-Za-z0-9._- and not "." or "..": safe as a path component. */
static bool config_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > CONFIG_NAME_MAX || !strcmp(s, ".") || !strcmp(s, ".."))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' &&
		    s[i] != '-')
			return false;
	return true;
}

static int add_attachment(struct configuration *cf, const char *name, bool enabled)
{
	struct attachment *a = realloc(cf->att, (cf->n + 1) * sizeof *a);
	if (!a)
		return -1;
	cf->att = a;
	a[cf->n].name = strdup(name);
	if (!a[cf->n].name)
		return -1;
	a[cf->n].enabled = enabled;
	cf->n++;
	return 0;
}

static const char *const attachments_keys[] = {"name", "enabled"};

static int parse_attachments(struct ctx *x, const yaml_node_t *n, const char *key,
			     struct configuration *cf)
{
	yaml_node_t *f[KEYS_N(attachments_keys)];
	char k[KEY_MAX], kk[KEY_MAX];
	if (want_seq(x, n, key) < 0)
		return -1;
	for (size_t i = 0; i < seq_len(n); i++) {
		yaml_node_t *item = seq_item(x, n, i);
		const char *name;
		bool enabled = true;
		if (!item)
			return fail(x, n, key, "malformed list");
		key_index(k, key, i);
		if (item->type == YAML_SCALAR_NODE) {
			if (get_str(x, item, k, false, &name) < 0)
				return -1;
		} else if (item->type == YAML_MAPPING_NODE) {
			if (get_fields(x, item, k, attachments_keys, KEYS_N(attachments_keys), f) < 0)
				return -1;
			if (!f[0])
				return fail(x, item, key_join(kk, k, "name"), "missing");
			if (get_str(x, f[0], key_join(kk, k, "name"), false, &name) < 0)
				return -1;
			if (f[1] && get_bool(x, f[1], key_join(kk, k, "enabled"), &enabled) < 0)
				return -1;
		} else {
			return fail(x, item, k, "expected a skill name or {name, enabled}, got %s",
				    node_kind(item));
		}
		if (add_attachment(cf, name, enabled) < 0)
			return fail_oom(x);
	}
	return 0;
}

static const char *const configurations_keys[] = {"skills", "tools"};

/* configurations.<name>.tools: the ceiling, a list of allowed-tools items
 * (an empty list allows no tool). What an item names is checked when it
 * is applied (grants_cap): an unknown tool there only narrows. */
static int parse_ceiling(struct ctx *x, const yaml_node_t *n, const char *key,
			 struct configuration *cf)
{
	if (n->type != YAML_SEQUENCE_NODE)
		return fail(x, n, key, "expected a list of tools (allowed-tools items such "
			    "as read or \"Bash(git diff:*)\"), got %s", node_kind(n));
	cf->has_ceiling = true;
	return parse_str_list(x, n, key, &cf->ceiling);
}

static int parse_configurations(struct ctx *x, const yaml_node_t *n)
{
	const char *key = "configurations";
	char k[KEY_MAX], kk[KEY_MAX];
	struct config *c = x->c;
	if (n->type != YAML_MAPPING_NODE)
		return fail(x, n, key, "expected a mapping of name to configuration, got %s",
			    node_kind(n));
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	     p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *kn = node_at(x, p->key), *vn = node_at(x, p->value), *f[KEYS_N(configurations_keys)];
		const char *name;
		if (!kn || !vn)
			return fail(x, n, key, "malformed mapping");
		if (get_str(x, kn, key, false, &name) < 0)
			return -1;
		key_join(k, key, name);
		if (!config_name_ok(name))
			return fail(x, kn, k, "bad configuration name '%.64s': use 1-64 of "
				    "A-Za-z0-9._- (not '.' or '..')", name);
		if (strcmp(name, CONFIG_ERROR_NAME) == 0)
			return fail(x, kn, k, "bad configuration name '%s': it is reserved "
				    "for the configs/%s file", name, CONFIG_ERROR_NAME);
		if (config_find(c, name))
			return fail(x, kn, k, "configuration defined twice");
		struct configuration *cs = realloc(c->configs, (c->nconfigs + 1) * sizeof *cs);
		if (!cs)
			return fail_oom(x);
		c->configs = cs;
		struct configuration *cf = &cs[c->nconfigs];
		memset(cf, 0, sizeof *cf);
		cf->name = strdup(name);
		if (!cf->name)
			return fail_oom(x);
		c->nconfigs++;
		if (is_null(vn))
			continue; /* a configuration with no skills */
		if (get_fields(x, vn, k, configurations_keys, KEYS_N(configurations_keys), f) < 0)
			return -1;
		if (f[0] && parse_attachments(x, f[0], key_join(kk, k, "skills"), cf) < 0)
			return -1;
		if (f[1] && parse_ceiling(x, f[1], key_join(kk, k, "tools"), cf) < 0)
			return -1;
	}
	return 0;
}

/* ---- the document ------------------------------------------------------ */

static const char *const audit_keys[] = {"keep"};

/* audit: {keep: N}, the entries of the audit trail kept. */
static int parse_audit(struct ctx *x, const yaml_node_t *n)
{
	yaml_node_t *f[KEYS_N(audit_keys)];
	if (get_fields(x, n, "audit", audit_keys, KEYS_N(audit_keys), f) < 0)
		return -1;
	if (f[0] && get_long(x, f[0], "audit.keep", 1, CONFIG_AUDIT_KEEP_MAX,
			     &x->c->audit_keep) < 0)
		return -1;
	return 0;
}

static const char *const watch_keys[] = {"rescan_seconds"};

/* watch: {rescan_seconds: N}, how often the directories the inotify watch
 * limit keeps from being watched are looked at again (0: never). */
static int parse_watch(struct ctx *x, const yaml_node_t *n)
{
	yaml_node_t *f[KEYS_N(watch_keys)];
	if (get_fields(x, n, "watch", watch_keys, KEYS_N(watch_keys), f) < 0)
		return -1;
	if (f[0] && get_long(x, f[0], "watch.rescan_seconds", 0, CONFIG_WATCH_RESCAN_MAX,
			     &x->c->watch_rescan_seconds) < 0)
		return -1;
	return 0;
}

static const char *const root_keys[] = {"sources", "skills", "tools", "model",
		"runs", "state", "configurations", "audit", "watch"};

static int parse_root(struct ctx *x, const yaml_node_t *root)
{
	yaml_node_t *f[KEYS_N(root_keys)];
	if (root->type != YAML_MAPPING_NODE)
		return fail(x, root, NULL, "expected a mapping at the top level, got %s",
			    node_kind(root));
	if (get_fields(x, root, "", root_keys, KEYS_N(root_keys), f) < 0)
		return -1;
	if ((f[0] && parse_sources(x, f[0]) < 0) ||
	    (f[1] && parse_skills(x, f[1]) < 0) ||
	    (f[2] && parse_tools(x, f[2]) < 0) ||
	    (f[3] && parse_model(x, f[3]) < 0) ||
	    (f[4] && parse_runs(x, f[4]) < 0) ||
	    (f[5] && parse_state(x, f[5]) < 0) ||
	    (f[6] && parse_configurations(x, f[6]) < 0) ||
	    (f[7] && parse_audit(x, f[7]) < 0) ||
	    (f[8] && parse_watch(x, f[8]) < 0))
		return -1;
	return 0;
}

/* Where each keys table applies, for config_known_keys: the tables the
 * parser takes its keys from (so its "unknown key" warning and the list
 * cannot differ). "[]" stands for any list item, "<...>" for any key of a
 * mapping. */
static const struct keyset {
	const char *where;
	const char *const *keys;
	size_t n;
} keysets[] = {
	{ NULL, root_keys, KEYS_N(root_keys) },
	{ "sources[]", sources_keys, KEYS_N(sources_keys) },
	{ "skills", skills_keys, KEYS_N(skills_keys) },
	{ "tools", tools_keys, KEYS_N(tools_keys) },
	{ "tools.limits.<tool>", limit_entry_keys, KEYS_N(limit_entry_keys) },
	{ "tools.webfetch", tool_webfetch_keys, KEYS_N(tool_webfetch_keys) },
	{ "tools.terminal", tool_terminal_keys, KEYS_N(tool_terminal_keys) },
	{ "model", model_keys, KEYS_N(model_keys) },
	{ "runs", runs_keys, KEYS_N(runs_keys) },
	{ "runs.budget", runs_budget_keys, KEYS_N(runs_budget_keys) },
	{ "runs.keep", runs_keep_keys, KEYS_N(runs_keep_keys) },
	{ "audit", audit_keys, KEYS_N(audit_keys) },
	{ "watch", watch_keys, KEYS_N(watch_keys) },
	{ "configurations.<name>", configurations_keys, KEYS_N(configurations_keys) },
	{ "configurations.<name>.skills[]", attachments_keys, KEYS_N(attachments_keys) },
};

int config_known_keys(struct strlist *out)
{
	for (size_t i = 0; i < KEYS_N(keysets); i++)
		for (size_t k = 0; k < keysets[i].n; k++)
			if ((keysets[i].where
				     ? strlist_addf(out, "%s.%s", keysets[i].where, keysets[i].keys[k])
				     : strlist_add(out, keysets[i].keys[k])) < 0)
				return -1;
	return 0;
}

static int set_default_terminal(struct config *c)
{
	const char *s = CONFIG_DEFAULT_TERMINAL_COMMANDS;
	while (*s) {
		size_t len = strcspn(s, " ");
		if (strlist_addf(&c->tools.terminal_commands, "%.*s", (int)len, s) < 0)
			return -1;
		s += len;
		s += strspn(s, " ");
	}
	return 0;
}

/* A config with every default and no sources or configurations. */
static struct config *config_new(void)
{
	struct config *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	c->max_bytes = CONFIG_DEFAULT_MAX_BYTES;
	c->listing_max_bytes = CONFIG_DEFAULT_LISTING_MAX_BYTES;
	c->execution_mode = EXEC_INLINE;
	c->min_trust = TRUST_UNTRUSTED;
	c->workers = CONFIG_DEFAULT_WORKERS;
	c->max_turns = CONFIG_DEFAULT_MAX_TURNS;
	c->prompt_max_bytes = CONFIG_DEFAULT_PROMPT_MAX;
	c->audit_keep = CONFIG_DEFAULT_AUDIT_KEEP;
	c->watch_rescan_seconds = CONFIG_DEFAULT_WATCH_RESCAN;
	c->budget = (struct run_budget){
		.model_calls = CONFIG_DEFAULT_BUDGET_MODEL_CALLS,
		.tool_calls_per_turn = CONFIG_DEFAULT_BUDGET_TOOL_CALLS_PER_TURN,
		.subagents = CONFIG_DEFAULT_BUDGET_SUBAGENTS,
		.depth = CONFIG_DEFAULT_BUDGET_DEPTH,
		.seconds = CONFIG_DEFAULT_BUDGET_SECONDS,
		.stored_bytes = CONFIG_DEFAULT_BUDGET_STORED_BYTES,
	};
	c->model.timeout = CONFIG_DEFAULT_MODEL_TIMEOUT;
	c->model.provider = strdup("echo");
	if (!c->model.provider || set_builtin_tools(c) < 0 ||
	    set_default_terminal(c) < 0) {
		config_free(c);
		return NULL;
	}
	return c;
}

/* The 1-based line of byte offset off in text. */
static unsigned long line_at_offset(const char *text, size_t len, size_t off)
{
	unsigned long line = 1;
	for (size_t i = 0; i < off && i < len; i++)
		if (text[i] == '\n')
			line++;
	return line;
}

static int yaml_error(struct ctx *x, yaml_parser_t *p, const char *text, size_t len)
{
	char *msg = NULL;
	int r;
	if (p->error == YAML_MEMORY_ERROR)
		return fail_oom(x);
	if (p->error == YAML_READER_ERROR)
		r = asprintf(&msg, "%s:%lu: cannot read YAML: %s at byte %zu", x->file,
			     line_at_offset(text, len, p->problem_offset),
			     p->problem ? p->problem : "bad input", p->problem_offset);
	else if (p->context && p->context_mark.line != p->problem_mark.line)
		r = asprintf(&msg, "%s:%lu: YAML syntax error: %s %s started at line %lu",
			     x->file, (unsigned long)p->problem_mark.line + 1,
			     p->problem ? p->problem : "unknown problem", p->context,
			     (unsigned long)p->context_mark.line + 1);
	else
		r = asprintf(&msg, "%s:%lu: YAML syntax error: %s%s%s", x->file,
			     (unsigned long)p->problem_mark.line + 1,
			     p->problem ? p->problem : "unknown problem",
			     p->context ? " " : "", p->context ? p->context : "");
	if (r < 0)
		return fail_oom(x);
	x->err = msg;
	return -1;
}

static void set_err(char **err, char *msg)
{
	if (err)
		*err = msg ? msg : strdup("out of memory");
	else
		free(msg);
}

int config_parse(const char *text, size_t len, const char *path,
		 const char *base_dir, struct config **out, char **err)
{
	struct ctx x = {.file = path ? path : "<config>"};
	yaml_parser_t parser;
	yaml_document_t doc, next;
	bool have_doc = false, parser_ok = false;
	char *base = NULL;
	int rc = -1;

	*out = NULL;
	if (err)
		*err = NULL;
	x.c = config_new();
	if (!x.c) {
		fail_oom(&x);
		goto done;
	}
	base = base_dir ? config_path_absolute(base_dir) : cwd_dup();
	if (!base) {
		char eb[128];
		if (asprintf(&x.err, "%s: cannot resolve the base directory: %s", x.file,
			     strerror_r(errno, eb, sizeof eb)) < 0)
			x.err = NULL;
		goto done;
	}
	x.c->base_dir = base;
	x.base_dir = base;
	if (path) {
		x.c->path = config_path_absolute(path);
		if (!x.c->path) {
			fail_oom(&x);
			goto done;
		}
	}

	if (len > (size_t)CONFIG_MAX_FILE_BYTES) {
		if (asprintf(&x.err, "%s: %zu bytes, over the limit of %ld bytes; "
			     "refusing the config file", x.file, len,
			     CONFIG_MAX_FILE_BYTES) < 0)
			x.err = NULL;
		goto done;
	}
	static const struct yaml_bounds bounds = {CONFIG_YAML_MAX_DEPTH,
		CONFIG_YAML_MAX_NODES, CONFIG_YAML_MAX_ALIAS_BYTES};
	size_t bline = 0;
	char why[128];
	int b = yaml_bounds_check(text, len, &bounds, &bline, why, sizeof why);
	if (b < 0) {
		fail_oom(&x);
		goto done;
	}
	if (b > 0) {
		if (asprintf(&x.err, "%s:%zu: %s; refusing the config file", x.file,
			     bline + 1, why) < 0)
			x.err = NULL;
		goto done;
	}
	if (!yaml_parser_initialize(&parser)) {
		fail_oom(&x);
		goto done;
	}
	parser_ok = true;
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		yaml_error(&x, &parser, text, len);
		goto done;
	}
	have_doc = true;
	x.doc = &doc;
	yaml_node_t *root = yaml_document_get_root_node(&doc);
	if (is_null(root)) {
		/* Most likely a file caught half-written, or emptied by
		 * mistake: taking it would drop every configuration. */
		if (asprintf(&x.err, "%s: the file holds no settings (it is empty "
			     "or only comments); write {} to take every default",
			     x.file) < 0)
			x.err = NULL;
		goto done;
	}
	if (parse_root(&x, root) < 0)
		goto done;
	/* Only the first document is read; a further one is a mistake worth
	 * a warning, and a syntax error after it is still an error. */
	if (!yaml_parser_load(&parser, &next)) {
		yaml_error(&x, &parser, text, len);
		goto done;
	}
	yaml_node_t *extra = yaml_document_get_root_node(&next);
	int w = extra ? warn(&x, extra, "only the first YAML document is read") : 0;
	yaml_document_delete(&next);
	if (w < 0)
		goto done;
	rc = 0;
done:
	if (have_doc)
		yaml_document_delete(&doc);
	if (parser_ok)
		yaml_parser_delete(&parser);
	if (rc == 0) {
		*out = x.c;
		free(x.err);
	} else {
		config_free(x.c);
		set_err(err, x.err);
	}
	return rc;
}

/* Reads a whole regular file of at most CONFIG_MAX_FILE_BYTES. Opened
 * without blocking: a FIFO put in the file's place is refused, not waited
 * on (the watcher thread reads it). */
static int read_file(const char *path, struct buf *b, char **err)
{
	char eb[128];
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		goto sys;
	if (fstat(fd, &st) < 0)
		goto sys;
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		if (err && asprintf(err, "%s: not a regular file", path) < 0)
			*err = NULL;
		return -1;
	}
	for (;;) {
		char chunk[8192];
		ssize_t r = read(fd, chunk, sizeof chunk);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			goto sys;
		if (r == 0)
			break;
		if (b->len + (size_t)r > CONFIG_MAX_FILE_BYTES) {
			close(fd);
			if (err && asprintf(err, "%s: larger than %ld bytes", path,
					    CONFIG_MAX_FILE_BYTES) < 0)
				*err = NULL;
			return -1;
		}
		if (buf_append(b, chunk, (size_t)r) < 0)
			goto sys;
	}
	close(fd);
	return 0;
sys: {
	int e = errno;
	if (fd >= 0)
		close(fd);
	if (err && asprintf(err, "%s: cannot read the config file: %s", path,
			    strerror_r(e, eb, sizeof eb)) < 0)
		*err = NULL;
	return -1;
}
}

int config_load(const char *path, struct config **out, char **err)
{
	struct buf b = {0};
	*out = NULL;
	if (err)
		*err = NULL;
	if (read_file(path, &b, err) < 0) {
		buf_free(&b);
		if (err && !*err)
			*err = strdup("out of memory");
		return -1;
	}
	char *abs = config_path_absolute(path);
	if (!abs) {
		buf_free(&b);
		set_err(err, NULL);
		return -1;
	}
	/* The directory of the file: cut at the last slash ("/" stays). */
	char *dir = strdup(abs);
	if (!dir) {
		free(abs);
		buf_free(&b);
		set_err(err, NULL);
		return -1;
	}
	char *slash = strrchr(dir, '/');
	slash[slash == dir ? 1 : 0] = '\0';
	int rc = config_parse(b.data ? b.data : "", b.len, path, dir, out, err);
	if (rc == 0) {
		free((*out)->path);
		(*out)->path = abs;
	} else {
		free(abs);
	}
	free(dir);
	buf_free(&b);
	return rc;
}

struct config *config_default(const char *const *dirs, size_t ndirs)
{
	struct config *c = config_new();
	if (!c)
		return NULL;
	c->base_dir = cwd_dup();
	if (!c->base_dir || config_add_sources(c, dirs, ndirs) < 0)
		goto fail;
	c->configs = calloc(1, sizeof *c->configs);
	if (!c->configs)
		goto fail;
	c->configs[0].name = strdup("default");
	if (!c->configs[0].name)
		goto fail;
	c->configs[0].attach_all = true;
	c->nconfigs = 1;
	return c;
fail:
	config_free(c);
	return NULL;
}

int config_add_sources(struct config *c, const char *const *dirs, size_t ndirs)
{
	for (size_t i = 0; i < ndirs; i++) {
		char *abs = config_path_absolute(dirs[i]);
		if (!abs || add_source(c, abs, TRUST_FIRST_PARTY, false, false) < 0)
			return -1;
	}
	return 0;
}

const char *config_learn_dir(const struct config *c)
{
	for (size_t i = 0; c && i < c->nsources; i++)
		if (c->sources[i].writable)
			return c->sources[i].path;
	return NULL;
}

const struct configuration *config_find(const struct config *c, const char *name)
{
	for (size_t i = 0; c && name && i < c->nconfigs; i++)
		if (c->configs[i].name && !strcmp(c->configs[i].name, name))
			return &c->configs[i];
	return NULL;
}

enum trust config_skill_trust(const struct config *c, const char *skill,
			      enum trust src_trust)
{
	for (size_t i = 0; c && skill && i < c->ntrust_overrides; i++)
		if (!strcmp(c->trust_overrides[i].skill, skill))
			return c->trust_overrides[i].trust;
	return src_trust;
}

bool config_skill_disabled(const struct config *c, const char *skill)
{
	return c && skill && strlist_has(&c->disabled, skill);
}

bool config_skill_acknowledged(const struct config *c, const char *skill)
{
	return c && skill && strlist_has(&c->acknowledged, skill);
}

bool config_tool_registered(const struct config *c, const char *tool)
{
	for (size_t i = 0; c && tool && i < c->registered_tools.n; i++)
		if (!strcasecmp(c->registered_tools.items[i], tool))
			return true;
	return false;
}

static const struct tool_limit *tool_limit(const struct config *c, const char *tool)
{
	for (size_t i = 0; c && tool && i < c->tools.nlimits; i++)
		if (!strcmp(c->tools.limits[i].tool, tool))
			return &c->tools.limits[i];
	return NULL;
}

int config_tool_timeout_ms(const struct config *c, const char *tool)
{
	const struct tool_limit *l = tool_limit(c, tool);
	return (l && l->timeout ? l->timeout : CONFIG_DEFAULT_TOOL_TIMEOUT) * 1000;
}

size_t config_tool_output_max(const struct config *c, const char *tool)
{
	const struct tool_limit *l = tool_limit(c, tool);
	return (size_t)(l && l->output_bytes ? l->output_bytes : CONFIG_DEFAULT_TOOL_OUTPUT);
}

int config_tool_unavailable(struct config *c, const char *tool, const char *why)
{
	if (!strlist_has(&c->registered_tools, tool))
		return 0;
	if (strlist_add(&c->tools.unavailable, tool) < 0)
		return -1;
	if (strlist_add(&c->tools.unavailable_why, why) < 0) {
		strlist_remove(&c->tools.unavailable, tool);
		return -1;
	}
	strlist_remove(&c->registered_tools, tool);
	strlist_remove(&c->approval_tools, tool);
	return 0;
}

const char *config_tool_unavailable_why(const struct config *c, const char *tool)
{
	for (size_t i = 0; c && tool && i < c->tools.unavailable.n; i++)
		if (!strcasecmp(c->tools.unavailable.items[i], tool))
			return c->tools.unavailable_why.items[i];
	return NULL;
}

void config_free(struct config *c)
{
	if (!c)
		return;
	free(c->path);
	free(c->base_dir);
	for (size_t i = 0; i < c->nsources; i++) {
		free(c->sources[i].path);
		free(c->sources[i].fingerprint);
	}
	free(c->sources);
	strlist_free(&c->disabled);
	strlist_free(&c->acknowledged);
	for (size_t i = 0; i < c->ntrust_overrides; i++)
		free(c->trust_overrides[i].skill);
	free(c->trust_overrides);
	strlist_free(&c->registered_tools);
	strlist_free(&c->approval_tools);
	free(c->tools.sandbox_program);
	free(c->tools.user);
	strlist_free(&c->tools.env);
	strlist_free(&c->tools.terminal_commands);
	for (size_t i = 0; i < c->tools.nlimits; i++)
		free(c->tools.limits[i].tool);
	free(c->tools.limits);
	strlist_free(&c->tools.unavailable);
	strlist_free(&c->tools.unavailable_why);
	free(c->model.provider);
	strlist_free(&c->model.command);
	free(c->model.base_url);
	free(c->model.model);
	free(c->model.api_key_env);
	free(c->state_path);
	strlist_free(&c->workdir_roots);
	for (size_t i = 0; i < c->nconfigs; i++) {
		for (size_t j = 0; j < c->configs[i].n; j++)
			free(c->configs[i].att[j].name);
		free(c->configs[i].att);
		free(c->configs[i].name);
		strlist_free(&c->configs[i].ceiling);
	}
	free(c->configs);
	strlist_free(&c->warnings);
	free(c);
}
