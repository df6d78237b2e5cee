#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claude.h"
#include "effective.h"
#include "grants.h"
#include "json_text.h"
#include "resolution.h"

static const char *source_path(const struct config *c, size_t i)
{
	return c && i < c->nsources && c->sources[i].path ? c->sources[i].path : "?";
}

static int report_skill(struct buf *out, const char *label,
			const struct skill *s, const char *trust,
			const char *source)
{
	int rc;
	if (s->valid)
		rc = buf_printf(out, "skill %s: valid, %s, trust %s, source %s\n", label,
				s->category == SKILL_KNOWLEDGE ? "knowledge" : "action",
				trust, source);
	else
		rc = buf_printf(out, "skill %s: invalid: %s; trust %s, source %s\n",
				label, s->error ? s->error : "unparsable SKILL.md",
				trust, source);
	for (size_t k = 0; k < s->warnings.n && rc == 0; k++)
		rc = buf_printf(out, "skill %s: warning: %s\n", label, s->warnings.items[k]);
	return rc;
}

static int report_skills(const struct config *c, const struct catalog *cat,
			 struct buf *out)
{
	int rc = 0;
	for (size_t i = 0; cat && i < cat->n && rc == 0; i++) {
		const struct catalog_entry *e = &cat->entries[i];
		const struct skill *s = e->skill;
		if (!s)
			continue;
		const char *name = s->name ? s->name : "?";
		const char *src = source_path(c, e->source);
		rc = report_skill(out, name, s, trust_name(e->trust), src);
		if (rc == 0 && e->disabled)
			rc = buf_printf(out, "skill %s: disabled (skills.disabled)\n", name);
		for (size_t k = 0; k < e->warnings.n && rc == 0; k++)
			rc = buf_printf(out, "skill %s: warning: %s\n", name,
					e->warnings.items[k]);
		for (size_t k = 0; k < s->nsubs && rc == 0; k++) {
			const struct skill *sub = s->subs[k];
			char *label = NULL;
			if (asprintf(&label, "%s/%s", name,
				     sub->name ? sub->name : "?") < 0)
				return -1;
			rc = report_skill(out, label, sub, trust_name(e->trust), src);
			free(label);
		}
	}
	for (size_t k = 0; cat && k < cat->warnings.n && rc == 0; k++)
		rc = buf_printf(out, "catalog: warning: %s\n", cat->warnings.items[k]);
	return rc;
}

/* Whether the watches a mount needs exceed those left, and if so the
 * warning line saying so. */
static int report_watch(const struct config *c, const struct check_watch *w, struct buf *out)
{
	if (w->limit < 0)
		return 0;
	long in_use = w->in_use > 0 ? w->in_use : 0;
	long left = w->limit > in_use ? w->limit - in_use : 0;
	if (w->needed <= (size_t)left)
		return 0;
	int rc = buf_printf(out, "catalog: warning: the inotify watch limit is too low for these "
				 "skills: a mount watches %zu directories and ",
			    w->needed);
	if (rc == 0 && w->in_use >= 0)
		rc = buf_printf(out, "%ld watches are left (%s is %ld, %ld in use)", left,
				w->sysctl, w->limit, w->in_use);
	else if (rc == 0)
		rc = buf_printf(out, "%s is %ld", w->sysctl, w->limit);
	long rescan = c ? c->watch_rescan_seconds : CONFIG_DEFAULT_WATCH_RESCAN;
	if (rc == 0 && rescan > 0)
		rc = buf_printf(out, "; changes in the others are found by a rescan every %ld s "
				     "(watch.rescan_seconds) instead of at once",
				rescan);
	else if (rc == 0)
		rc = buf_puts(out, "; changes in the others are not followed "
				   "(watch.rescan_seconds is 0)");
	if (rc == 0)
		rc = buf_puts(out, "; raise the sysctl fs.inotify.max_user_watches\n");
	return rc;
}

/* The Claude Code settings of r, as configs/<cfg>/claude/ holds them. */
static int report_claude(const struct resolution *r, struct buf *out)
{
	const char *n = r->config_name;
	json_t *j = claude_settings_json(&r->claude);
	int rc = j ? buf_printf(out, "configuration %s: claude settings.json: ", n) : -1;
	if (rc == 0)
		rc = json_text_append(out, j, JSON_COMPACT);
	json_decref(j);
	for (size_t i = 0; i < r->claude.warnings.n && rc == 0; i++)
		rc = buf_printf(out, "configuration %s: claude warning: %s\n", n,
				r->claude.warnings.items[i]);
	return rc;
}

/* The configuration's tool ceiling and what it took from the list:
 * "configuration c: ceiling: read Bash(git diff:*)", then one line per
 * item it removed or narrowed. */
static int report_ceiling(const char *n, const struct grants *g, struct buf *out)
{
	int rc = buf_printf(out, "configuration %s: ceiling:", n);
	for (size_t i = 0; i < g->ceiling.n && rc == 0; i++)
		rc = buf_printf(out, " %s", g->ceiling.items[i]);
	if (rc == 0)
		rc = buf_puts(out, g->ceiling.n ? "\n" : " (no tool)\n");
	for (size_t i = 0; i < g->ncut && rc == 0; i++) {
		rc = buf_printf(out, "configuration %s: ceiling removes %s", n, g->cut[i].item);
		for (size_t k = 0; k < g->cut[i].kept.n && rc == 0; k++)
			rc = buf_printf(out, "%s%s", k ? ", " : " (keeps ", g->cut[i].kept.items[k]);
		if (rc == 0)
			rc = buf_puts(out, g->cut[i].kept.n ? ")\n" : "\n");
	}
	return rc;
}

/* Reports one configuration; adds its errors to *errors. */
static int report_configuration(const struct config *c, const struct catalog *cat,
				const struct configuration *cfg,
				const struct check_options *opts, struct buf *out,
				int *errors)
{
	struct resolution *r = resolution_build(c, cat, cfg, NULL, 0);
	if (!r)
		return -1;
	const char *n = r->config_name;
	int rc = 0;
	if (r->eff.n == 0)
		rc = buf_printf(out, "configuration %s: no skills attached\n", n);
	for (size_t i = 0; i < r->eff.n && rc == 0; i++) {
		const struct eff_item *it = &r->eff.items[i];
		rc = buf_printf(out, "configuration %s: skill %s: %s (%s)\n", n,
				it->name, eff_state_name(it->state), it->reason);
		if (rc == 0 && (it->state == EFF_ORPHANED || it->state == EFF_INVALID)) {
			(*errors)++;
			rc = buf_printf(out, "configuration %s: error: skill '%s' %s: %s\n",
					n, it->name, eff_state_name(it->state), it->reason);
		}
	}
	if (rc == 0)
		rc = buf_printf(out, "configuration %s: effective:", n);
	for (size_t i = 0; i < r->eff.neff && rc == 0; i++)
		rc = buf_printf(out, " %s", cat->entries[r->eff.eff[i]].skill->name);
	if (rc == 0)
		rc = buf_puts(out, r->eff.neff ? "\n" : " (none)\n");
	if (rc == 0)
		rc = buf_printf(out, "configuration %s: policy: %s\n", n,
				r->grants.policy == GRANTS_ALL ? "all" : "list");
	if (rc == 0)
		rc = buf_printf(out, "configuration %s: tools:", n);
	for (size_t i = 0; i < r->grants.n && rc == 0; i++) {
		const struct grant_tool *t = &r->grants.tools[i];
		if (t->unrestricted)
			rc = buf_printf(out, " %s", t->name);
		for (size_t k = 0; !t->unrestricted && k < t->patterns.n && rc == 0; k++)
			rc = buf_printf(out, " %s(%s:*)", t->name, t->patterns.items[k]);
	}
	if (rc == 0)
		rc = buf_puts(out, r->grants.n ? "\n" : " (none)\n");
	if (rc == 0 && r->grants.capped)
		rc = report_ceiling(n, &r->grants, out);
	for (size_t i = 0; i < r->grants.warnings.n && rc == 0; i++)
		rc = buf_printf(out, "configuration %s: warning: %s\n", n,
				r->grants.warnings.items[i]);
	for (size_t i = 0; i < r->prompt.warnings.n && rc == 0; i++)
		rc = buf_printf(out, "configuration %s: budget: %s\n", n,
				r->prompt.warnings.items[i]);
	if (rc == 0 && r->prompt.unlisted)
		rc = buf_printf(out,
				"configuration %s: budget: %zu skills not listed in <available_skills> (skills.listingMaxBytes=%ld)\n",
				n, r->prompt.unlisted, c->listing_max_bytes);
	if (rc == 0 && opts && opts->claude)
		rc = report_claude(r, out);
	resolution_free(r);
	return rc;
}

int check_report(const struct config *c, const struct catalog *cat,
		 const char *config_error, struct buf *out)
{
	return check_report_opts(c, cat, config_error, NULL, out);
}

int check_report_opts(const struct config *c, const struct catalog *cat,
		      const char *config_error, const struct check_options *opts,
		      struct buf *out)
{
	int errors = 0, rc = 0;
	if (config_error) {
		errors++;
		rc = buf_printf(out, "config: error: %s\n", config_error);
	}
	for (size_t i = 0; c && i < c->warnings.n && rc == 0; i++)
		rc = buf_printf(out, "config: warning: %s\n", c->warnings.items[i]);
	if (rc == 0)
		rc = report_skills(c, cat, out);
	if (rc == 0 && opts && opts->watch)
		rc = report_watch(c, opts->watch, out);
	for (size_t i = 0; c && i < c->nconfigs && rc == 0; i++)
		rc = report_configuration(c, cat, &c->configs[i], opts, out, &errors);
	if (rc == 0)
		rc = buf_printf(out, "errors: %d\n", errors);
	return rc < 0 ? -1 : errors;
}
