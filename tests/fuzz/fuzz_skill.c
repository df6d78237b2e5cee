/* libFuzzer target: the SKILL.md parser (core/skill.c). Any bytes are a
 * SKILL.md: skill_parse must not crash or leak, what it parsed must
 * render as skill.json, and its text must read back as the bytes given.
 * The injection scan (core/trust/findings.c) reads the same bytes: each
 * finding is on a line the text has, in line order. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "findings.h"
#include "skill.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The lines of text (len bytes): its newlines, plus one. */
static unsigned lines_of(const uint8_t *text, size_t len)
{
	unsigned n = 1;
	for (size_t i = 0; i < len; i++)
		n += text[i] == '\n';
	return n;
}

static void scan_findings(const uint8_t *data, size_t size)
{
	static struct findings_rules *rules;
	char *err = NULL;
	if (!rules && !(rules = findings_rules_new(&err)))
		abort(); /* the table does not compile: never so */
	/* findings_scan takes NUL-terminated text, as the scan gives it. */
	char *text = malloc(size + 1);
	if (!text)
		return;
	memcpy(text, data, size);
	text[size] = '\0';
	struct finding *f = NULL;
	size_t n = 0, more = 0;
	if (findings_scan(rules, text, size, &f, &n, &more) == 0) {
		unsigned last = lines_of(data, size);
		for (size_t i = 0; i < n; i++)
			if (f[i].line < 1 || f[i].line > last || (i && f[i].line < f[i - 1].line))
				abort();
	}
	free(f);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	scan_findings(data, size);
	/* Small limits too, so the size checks are reached with short inputs. */
	struct skill_limits small = { .frontmatter_max = 512, .file_max = 2048 };
	const struct skill_limits *lims[2] = { NULL, &small };
	for (int i = 0; i < 2; i++) {
		struct skill *s = skill_parse("fuzz-skill", "/nonexistent/fuzz-skill",
					      (const char *)data, size, lims[i]);
		if (!s)
			continue; /* out of memory */
		json_t *j = skill_to_json(s);
		char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
		free(text);
		json_decref(j);
		/* Its text is the bytes given, and its body body_len bytes. */
		char *raw = NULL, *body = NULL;
		size_t raw_len = 0, body_len = 0;
		int rr = skill_read_text(s, SKILL_TEXT_RAW, &raw, &raw_len);
		int rb = skill_read_text(s, SKILL_TEXT_BODY, &body, &body_len);
		if ((rr == 0 && (raw_len != size || (size && memcmp(raw, data, size) != 0))) ||
		    (rr < 0 && rr != -ENOMEM && (rr != -ENODATA || s->text_read)) ||
		    (rb == 0 && body_len != s->body_len) || (rb < 0 && rb != -ENOMEM))
			abort();
		free(raw);
		free(body);
		char *q = skill_quote(s->name);
		free(q);
		(void)skill_name_unusable(s->name);
		skill_unref(s);
	}
	return 0;
}
