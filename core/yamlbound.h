/* yamlbound: bounds on a YAML text's shape (nesting depth, values counted
 * with what aliases repeat, bytes repeated by aliases), checked event by
 * event so that a hostile text is refused after reading only as much of it
 * as passes a bound: libyaml's document loader and the readers built on its
 * events never see more. Shared by SKILL.md front-matter and the config
 * file. */
#ifndef SKILLFS_YAMLBOUND_H
#define SKILLFS_YAMLBOUND_H

#include <stddef.h>
#include <yaml.h>

struct yaml_bounds {
	size_t max_depth;       /* open sequences and mappings at once */
	size_t max_nodes;       /* values, an alias counting as what it repeats */
	size_t max_alias_bytes; /* scalar bytes repeated by aliases */
};

struct yaml_budget_anchor;
struct yaml_budget_frame;

/* The running count of one event stream against its bounds. */
struct yaml_budget {
	struct yaml_bounds b;
	size_t depth, nodes, bytes, alias_bytes;
	struct yaml_budget_frame *st;       /* max_depth frames */
	struct yaml_budget_anchor *anchors; /* open-addressing table */
	size_t nanchors, canchors;
	char why[112];                      /* the last refusal */
};

/* Starts a count. Returns 0, or -1 (ENOMEM). */
int yaml_budget_init(struct yaml_budget *g, const struct yaml_bounds *b);
/* Counts one event. Returns 0 while the stream keeps within the bounds;
 * 1 with *why (text in g naming the bound, valid until the next call) at
 * the first event that passes one; -1 on ENOMEM. An alias of an unknown anchor counts as one value
 * (the reader reports it). */
int yaml_budget_event(struct yaml_budget *g, const yaml_event_t *ev,
		      const char **why);
/* Frees what the count holds. */
void yaml_budget_free(struct yaml_budget *g);

/* Reads text's events (building nothing) until the end, a syntax error or
 * the first event past a bound. Returns 0 when no bound is passed (a syntax
 * error is left to the real reader, which reports it with its context);
 * 1 with *line (0-based) and why (NUL-terminated, cut to whylen) set;
 * -1 on ENOMEM. */
int yaml_bounds_check(const char *text, size_t len, const struct yaml_bounds *b,
		      size_t *line, char *why, size_t whylen);

#endif
