/* yamlbound: bounds on a YAML text's shape, counted event by event. */
#include "yamlbound.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct yaml_budget_anchor {
	char *name; /* NULL: a free slot */
	size_t nodes, bytes;
};

struct yaml_budget_frame {
	char *anchor; /* of this collection, or NULL */
	size_t nodes0, bytes0;
};

int yaml_budget_init(struct yaml_budget *g, const struct yaml_bounds *b)
{
	memset(g, 0, sizeof *g);
	g->b = *b;
	g->st = calloc(b->max_depth ? b->max_depth : 1, sizeof *g->st);
	return g->st ? 0 : -1;
}

void yaml_budget_free(struct yaml_budget *g)
{
	for (size_t i = 0; g->st && i < g->depth; i++)
		free(g->st[i].anchor);
	free(g->st);
	for (size_t i = 0; i < g->canchors; i++)
		free(g->anchors[i].name);
	free(g->anchors);
	memset(g, 0, sizeof *g);
}

static size_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return (size_t)h;
}

/* The slot of name: where it is, or the free slot where it would go. */
static struct yaml_budget_anchor *anchor_slot(struct yaml_budget_anchor *t,
					      size_t cap, const char *name)
{
	size_t i = name_hash(name) & (cap - 1);
	while (t[i].name && strcmp(t[i].name, name) != 0)
		i = (i + 1) & (cap - 1);
	return &t[i];
}

static int anchor_grow(struct yaml_budget *g)
{
	size_t cap = g->canchors ? g->canchors * 2 : 16;
	struct yaml_budget_anchor *t = calloc(cap, sizeof *t);
	if (!t)
		return -1;
	for (size_t i = 0; i < g->canchors; i++)
		if (g->anchors[i].name)
			*anchor_slot(t, cap, g->anchors[i].name) = g->anchors[i];
	free(g->anchors);
	g->anchors = t;
	g->canchors = cap;
	return 0;
}

/* Records what anchor name stands for; a redefinition replaces it. */
static int anchor_set(struct yaml_budget *g, const char *name, size_t nodes,
		      size_t bytes)
{
	if ((g->nanchors + 1) * 2 > g->canchors && anchor_grow(g) < 0)
		return -1;
	struct yaml_budget_anchor *a = anchor_slot(g->anchors, g->canchors, name);
	if (!a->name) {
		a->name = strdup(name);
		if (!a->name)
			return -1;
		g->nanchors++;
	}
	a->nodes = nodes;
	a->bytes = bytes;
	return 0;
}

static const struct yaml_budget_anchor *anchor_get(const struct yaml_budget *g,
						   const char *name)
{
	if (!g->canchors)
		return NULL;
	const struct yaml_budget_anchor *a = anchor_slot(g->anchors, g->canchors, name);
	return a->name ? a : NULL;
}

static int count(struct yaml_budget *g, size_t nodes, size_t bytes, bool alias,
		 const char **why)
{
	g->nodes += nodes;
	g->bytes += bytes;
	if (alias)
		g->alias_bytes += bytes;
	if (g->nodes > g->b.max_nodes) {
		snprintf(g->why, sizeof g->why, "more than %zu values (counting "
			 "what aliases repeat)", g->b.max_nodes);
		*why = g->why;
		return 1;
	}
	if (g->alias_bytes > g->b.max_alias_bytes) {
		snprintf(g->why, sizeof g->why, "aliases repeat more than %zu "
			 "bytes of text", g->b.max_alias_bytes);
		*why = g->why;
		return 1;
	}
	return 0;
}

int yaml_budget_event(struct yaml_budget *g, const yaml_event_t *ev,
		      const char **why)
{
	switch (ev->type) {
	case YAML_SCALAR_EVENT: {
		size_t n = ev->data.scalar.length;
		int r = count(g, 1, n, false, why);
		if (r == 0 && ev->data.scalar.anchor &&
		    anchor_set(g, (const char *)ev->data.scalar.anchor, 1, n) < 0)
			return -1;
		return r;
	}
	case YAML_ALIAS_EVENT: {
		const struct yaml_budget_anchor *a =
			anchor_get(g, (const char *)ev->data.alias.anchor);
		return a ? count(g, a->nodes, a->bytes, true, why)
			 : count(g, 1, 0, false, why);
	}
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT: {
		if (g->depth >= g->b.max_depth) {
			snprintf(g->why, sizeof g->why, "nested deeper than %zu levels",
				 g->b.max_depth);
			*why = g->why;
			return 1;
		}
		int r = count(g, 1, 0, false, why);
		if (r)
			return r;
		const yaml_char_t *anchor = ev->type == YAML_SEQUENCE_START_EVENT
			? ev->data.sequence_start.anchor : ev->data.mapping_start.anchor;
		struct yaml_budget_frame f = {NULL, g->nodes - 1, g->bytes};
		if (anchor && !(f.anchor = strdup((const char *)anchor)))
			return -1;
		g->st[g->depth++] = f;
		return 0;
	}
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT: {
		if (!g->depth)
			return 0;
		struct yaml_budget_frame f = g->st[--g->depth];
		int r = f.anchor ? anchor_set(g, f.anchor, g->nodes - f.nodes0,
					      g->bytes - f.bytes0) : 0;
		free(f.anchor);
		return r;
	}
	default:
		return 0;
	}
}

int yaml_bounds_check(const char *text, size_t len, const struct yaml_bounds *b,
		      size_t *line, char *why, size_t whylen)
{
	struct yaml_budget g;
	yaml_parser_t p;
	if (yaml_budget_init(&g, b) < 0)
		return -1;
	if (!yaml_parser_initialize(&p)) {
		yaml_budget_free(&g);
		return -1;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	int r = 0;
	for (;;) {
		yaml_event_t ev;
		if (!yaml_parser_parse(&p, &ev)) {
			r = p.error == YAML_MEMORY_ERROR ? -1 : 0;
			break;
		}
		const char *w = NULL;
		bool end = ev.type == YAML_STREAM_END_EVENT;
		r = yaml_budget_event(&g, &ev, &w);
		if (r == 1) {
			*line = ev.start_mark.line;
			snprintf(why, whylen, "%s", w);
		}
		yaml_event_delete(&ev);
		if (r || end)
			break;
	}
	yaml_parser_delete(&p);
	yaml_budget_free(&g);
	return r;
}
