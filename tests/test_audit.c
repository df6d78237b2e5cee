/* Unit tests for core/trust/audit (issue 19; DESIGN.md section 8, the
 * audit file): the events between two states of the catalogue, the
 * events of a reload (only what changed), and the trail kept in the state
 * database across mounts (a change made while nothing was mounted is
 * recorded at the next one). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "engine.h"
#include "store.h"

#include "testutil.h"

static int setup(void **state)
{
	*state = test_tmpdir("audittest");
	return 0;
}

static int teardown(void **state)
{
	test_rm_tree(*state);
	return 0;
}

static json_t *js(const char *text)
{
	json_error_t je;
	json_t *v = json_loads(text, 0, &je);
	if (!v)
		fail_msg("bad JSON in test: %s", je.text);
	return v;
}

/* The events' "event" and "skill" (or "source") members, one per line. */
static char *summary(const json_t *events)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	assert_non_null(f);
	size_t i;
	json_t *e;
	json_array_foreach(events, i, e) {
		const char *who = json_string_value(json_object_get(e, "skill"));
		if (!who)
			who = json_string_value(json_object_get(e, "source"));
		fprintf(f, "%s %s\n", json_string_value(json_object_get(e, "event")), who ? who : "");
	}
	assert_int_equal(fclose(f), 0);
	return out;
}

static void diff_is(const char *key, const char *was, const char *now, const char *want)
{
	json_t *a = was ? js(was) : NULL, *b = now ? js(now) : NULL, *ev = json_array();
	assert_int_equal(audit_diff(key, a, b, ev), 0);
	char *got = summary(ev);
	if (strcmp(got, want) != 0)
		fail_msg("%s: %s -> %s gave [%s], expected [%s]", key, was ? was : "-",
			 now ? now : "-", got, want);
	free(got);
	json_decref(a);
	json_decref(b);
	json_decref(ev);
}

/* Each kind of event, from two states of one key. */
static void test_diff_names_each_change(void **state)
{
	(void)state;
	const char *v1 = "{\"source\": \"/s\", \"digest\": \"sha256:1\", \"valid\": true}";
	const char *v2 = "{\"source\": \"/s\", \"digest\": \"sha256:2\", \"valid\": true}";
	const char *bad = "{\"source\": \"/s\", \"digest\": \"sha256:2\", \"valid\": false, "
			  "\"error\": \"why\"}";
	diff_is("skill:a", NULL, v1, "skill_added a\n");
	diff_is("skill:a", NULL, bad, "skill_added a\nskill_invalid a\n");
	diff_is("skill:a", v1, NULL, "skill_removed a\n");
	diff_is("skill:a", v1, v1, "");
	diff_is("skill:a", v1, v2, "skill_changed a\n");
	diff_is("skill:a", v1, bad, "skill_changed a\nskill_invalid a\n");
	diff_is("skill:a", bad, v2, "skill_valid a\n");
	const char *m = "{\"expected\": \"sha256:1\", \"actual\": \"sha256:1\", \"matched\": true}";
	const char *x = "{\"expected\": \"sha256:1\", \"actual\": \"sha256:9\", \"matched\": false, "
			"\"message\": \"differs\"}";
	const char *y = "{\"expected\": \"sha256:1\", \"actual\": \"sha256:8\", \"matched\": false}";
	diff_is("source:/p", NULL, m, "source_pin_matched /p\n");
	diff_is("source:/p", m, x, "source_pin_mismatch /p\n");
	diff_is("source:/p", x, y, "source_pin_mismatch /p\n"); /* another edit */
	diff_is("source:/p", x, x, "");
	diff_is("source:/p", x, m, "source_pin_matched /p\n");
	diff_is("source:/p", m, NULL, "source_unpinned /p\n");
	/* old and new digests are named */
	json_t *a = js(v1), *b = js(v2), *ev = json_array();
	assert_int_equal(audit_diff("skill:a", a, b, ev), 0);
	json_t *e = json_array_get(ev, 0);
	assert_string_equal(json_string_value(json_object_get(e, "old_digest")), "sha256:1");
	assert_string_equal(json_string_value(json_object_get(e, "new_digest")), "sha256:2");
	json_decref(a);
	json_decref(b);
	json_decref(ev);
}

static void put(const char *dir, const char *name, const char *body)
{
	char *d = test_join(dir, name), *p = test_join(d, "SKILL.md");
	mkdir(d, 0755);
	char text[512];
	snprintf(text, sizeof text, "---\nname: %s\ndescription: d\n---\n%s\n", name, body);
	test_write_text(p, text);
	free(p);
	free(d);
}

static struct engine *open_engine(const char *skills)
{
	const char *dirs[] = { skills };
	struct engine_options o = { .dirs = dirs, .ndirs = 1 };
	char *err = NULL;
	struct engine *e = engine_open(&o, &err);
	if (!e)
		fail_msg("engine_open: %s", err ? err : "?");
	return e;
}

/* Skills s0000.. s<n-1> in skills, each with body "body"; with want, a
 * "skill_added <name>" line for each (summary()'s form). */
static void put_many(const char *skills, int n, struct buf *want)
{
	char name[32];
	for (int i = 0; i < n; i++) {
		snprintf(name, sizeof name, "s%04d", i);
		put(skills, name, "body");
		if (want)
			assert_int_equal(buf_printf(want, "skill_added %s\n", name), 0);
	}
}

/* What the catch-up tests start from: n numbered skills (put_many) in
 * <root>/skills, an engine over them, and the store <root>/state.db. */
struct many {
	char *skills, *db;
	struct engine *e;
	struct store *st;
};

static void many_open(struct many *m, const char *root, int n, struct buf *want)
{
	m->skills = test_join(root, "skills");
	m->db = test_join(root, "state.db");
	mkdir(m->skills, 0755);
	put_many(m->skills, n, want);
	char *err = NULL;
	m->e = open_engine(m->skills);
	m->st = store_open(m->db, &err);
	assert_non_null(m->st);
}

static void many_close(struct many *m)
{
	store_close(m->st);
	engine_close(m->e);
	free(m->db);
	free(m->skills);
}

/* A reload's events: the one skill edited (its digests), the one added,
 * the one removed; nothing for the skills left alone. */
static void test_reload_records_only_what_changed(void **state)
{
	const char *root = *state;
	char *skills = test_join(root, "skills");
	mkdir(skills, 0755);
	put(skills, "same", "unchanged");
	put(skills, "edited", "one");
	put(skills, "gone", "bye");
	struct engine *e = open_engine(skills);
	struct snapshot *old = engine_snapshot(e);
	put(skills, "edited", "two, longer");
	put(skills, "fresh", "new");
	char *g = test_join(skills, "gone"), *gm = test_join(g, "SKILL.md");
	assert_int_equal(unlink(gm), 0);
	assert_int_equal(rmdir(g), 0);
	assert_int_equal(engine_reload(e, false, NULL), 0);
	struct snapshot *now = engine_snapshot(e);
	json_t *ev = json_array(), *states = json_object();
	assert_int_equal(audit_changes(old, now, ev, states), 0);
	char *got = summary(ev);
	assert_string_equal(got, "skill_changed edited\nskill_added fresh\nskill_removed gone\n");
	assert_int_equal(json_object_size(states), 3);
	assert_true(json_is_null(json_object_get(states, "skill:gone")));
	const struct catalog_entry *x = catalog_find(old->catalog, "edited");
	const struct catalog_entry *y = catalog_find(now->catalog, "edited");
	char d1[FP_TEXT_SIZE], d2[FP_TEXT_SIZE];
	fp_format(x->scan->digest, d1);
	fp_format(y->scan->digest, d2);
	json_t *c = json_array_get(ev, 0);
	assert_string_equal(json_string_value(json_object_get(c, "old_digest")), d1);
	assert_string_equal(json_string_value(json_object_get(c, "new_digest")), d2);
	free(got);
	json_decref(ev);
	json_decref(states);
	snapshot_unref(old);
	snapshot_unref(now);
	engine_close(e);
	free(gm);
	free(g);
	free(skills);
}

static char *trail(struct store *st)
{
	struct buf b = { 0 };
	assert_int_equal(store_audit_read(st, 0, 1 << 20, &b, NULL), 0);
	char *t = buf_steal(&b, NULL);
	assert_non_null(t);
	return t;
}

/* The trail survives in the database: a second audit_open records what
 * changed while no audit was open, and each reload from then on. */
static void test_trail_catches_up_across_mounts(void **state)
{
	const char *root = *state;
	char *skills = test_join(root, "skills"), *db = test_join(root, "state.db");
	mkdir(skills, 0755);
	put(skills, "keep", "k");
	put(skills, "drop", "d");
	char *err = NULL;
	struct engine *e = open_engine(skills);
	struct store *st = store_open(db, &err);
	assert_non_null(st);
	struct audit *a = audit_open(e, st, &err);
	assert_non_null(a);
	char *t = trail(st);
	assert_non_null(strstr(t, "\"event\":\"skill_added\",\"skill\":\"drop\""));
	assert_non_null(strstr(t, "\"event\":\"skill_added\",\"skill\":\"keep\""));
	free(t);
	audit_close(a);
	store_close(st);
	engine_close(e);

	/* while "unmounted" */
	char *d = test_join(skills, "drop"), *dm = test_join(d, "SKILL.md");
	assert_int_equal(unlink(dm), 0);
	assert_int_equal(rmdir(d), 0);
	e = open_engine(skills);
	st = store_open(db, &err);
	a = audit_open(e, st, &err);
	assert_non_null(a);
	t = trail(st);
	assert_non_null(strstr(t, "\"seq\":3,"));
	assert_non_null(strstr(t, "\"event\":\"skill_removed\",\"skill\":\"drop\""));
	/* keep, unchanged, is not added again */
	const char *k = strstr(t, "\"event\":\"skill_added\",\"skill\":\"keep\"");
	assert_non_null(k);
	assert_null(strstr(k + 1, "\"event\":\"skill_added\",\"skill\":\"keep\""));
	free(t);
	/* a reload while open */
	put(skills, "keep", "k, changed");
	assert_int_equal(engine_reload(e, false, NULL), 0);
	t = trail(st);
	assert_non_null(strstr(t, "\"seq\":4,"));
	assert_non_null(strstr(t, "\"event\":\"skill_changed\",\"skill\":\"keep\""));
	uint64_t size = 0;
	struct timespec mt;
	assert_int_equal(audit_file_size(a, &size, &mt), 0);
	assert_int_equal(size, strlen(t));
	char buf[64];
	assert_int_equal(audit_file_read(a, 2, 10, buf), 10);
	assert_memory_equal(buf, t + 2, 10);
	free(t);
	audit_close(a);
	store_close(st);
	engine_close(e);
	free(dm);
	free(d);
	free(db);
	free(skills);
}

/* The trail's events from line first on, as summary() gives them. */
static char *trail_events(struct store *st, size_t first)
{
	char *t = trail(st);
	json_t *events = json_array();
	size_t n = 0;
	for (char *p = t; *p; n++) {
		char *nl = strchr(p, '\n');
		assert_non_null(nl);
		*nl = '\0';
		if (n >= first)
			assert_int_equal(json_array_append_new(events, js(p)), 0);
		p = nl + 1;
	}
	char *s = summary(events);
	json_decref(events);
	free(t);
	return s;
}

/* audit_start catches up on its own thread; a read of the audit file
 * waits for it (it shows every skill added, not a part), and a reload
 * right after is recorded after it. */
static void test_start_catches_up_before_reads(void **state)
{
	struct many m;
	many_open(&m, *state, 1300, NULL);
	char *err = NULL;
	struct audit *a = audit_start(m.e, m.st, &err);
	assert_non_null(a);
	uint64_t size = 0;
	struct timespec mt;
	assert_int_equal(audit_file_size(a, &size, &mt), 0);
	char *t = trail(m.st);
	assert_int_equal(size, strlen(t));
	size_t lines = 0;
	for (const char *p = t; (p = strchr(p, '\n')); p++)
		lines++;
	assert_int_equal(lines, 1300);
	free(t);
	put(m.skills, "s0005", "edited");
	assert_int_equal(engine_reload(m.e, false, NULL), 0);
	char *got = trail_events(m.st, 1300);
	assert_string_equal(got, "skill_changed s0005\n");
	free(got);
	audit_close(a);
	many_close(&m);
}

/* audit_close while audit_start's catch-up runs cuts it short between
 * parts; what it recorded stays, and the next catch-up records the rest:
 * every skill added once, none twice. */
static void test_start_cut_short_loses_nothing(void **state)
{
	struct many m;
	struct buf want = { 0 };
	many_open(&m, *state, 3000, &want);
	char *err = NULL;
	struct audit *a = audit_start(m.e, m.st, &err);
	assert_non_null(a);
	/* Closed once its first part is recorded (3,000 skills are six). */
	uint64_t size = 0;
	for (int i = 0; i < 20000 && size == 0; i++) {
		assert_int_equal(store_audit_size(m.st, &size, NULL), 0);
		if (size == 0)
			usleep(100);
	}
	assert_true(size > 0);
	audit_close(a);
	a = audit_open(m.e, m.st, &err);
	assert_non_null(a);
	char *got = trail_events(m.st, 0);
	assert_string_equal(got, want.data);
	free(got);
	audit_close(a);
	many_close(&m);
	buf_free(&want);
}

/* A catch-up over more skills than it takes at once (it goes through the
 * stored states and the catalogue in parts) records what one pass over
 * everything would: the keys gone first, in key order, then the changes
 * in the catalogue's order; and leaves the stored states those of the
 * catalogue. */
static void test_catch_up_in_parts(void **state)
{
	struct many m;
	char name[32];
	struct buf want = { 0 };
	many_open(&m, *state, 1300, &want);
	char *err = NULL;
	struct audit *a = audit_open(m.e, m.st, &err);
	assert_non_null(a);
	char *got = trail_events(m.st, 0);
	assert_string_equal(got, want.data);
	free(got);
	audit_close(a);
	engine_close(m.e);

	/* while "unmounted": every third gone, every seventh left edited,
	 * three new ones */
	buf_free(&want);
	struct buf later = { 0 };
	for (int i = 0; i < 1300; i++) {
		snprintf(name, sizeof name, "s%04d", i);
		if (i % 3 == 0) {
			char *d = test_join(m.skills, name), *dm = test_join(d, "SKILL.md");
			assert_int_equal(unlink(dm), 0);
			assert_int_equal(rmdir(d), 0);
			free(dm);
			free(d);
			assert_int_equal(buf_printf(&want, "skill_removed %s\n", name), 0);
		} else if (i % 7 == 0) {
			put(m.skills, name, "edited body");
			assert_int_equal(buf_printf(&later, "skill_changed %s\n", name), 0);
		}
	}
	for (int i = 0; i < 3; i++) {
		snprintf(name, sizeof name, "t%d", i);
		put(m.skills, name, "new");
		assert_int_equal(buf_printf(&later, "skill_added %s\n", name), 0);
	}
	assert_int_equal(buf_append(&want, later.data, later.len), 0);
	m.e = open_engine(m.skills);
	a = audit_open(m.e, m.st, &err);
	assert_non_null(a);
	got = trail_events(m.st, 1300);
	assert_string_equal(got, want.data);
	free(got);
	json_t *known = NULL;
	assert_int_equal(store_audit_state(m.st, &known, NULL), 0);
	struct snapshot *s = engine_snapshot(m.e);
	assert_int_equal(json_object_size(known), s->catalog->n);
	for (size_t i = 0; i < s->catalog->n; i++) {
		char key[80];
		snprintf(key, sizeof key, "skill:%s", s->catalog->entries[i].skill->name);
		assert_non_null(json_object_get(known, key));
	}
	snapshot_unref(s);
	json_decref(known);
	audit_close(a);
	many_close(&m);
	buf_free(&want);
	buf_free(&later);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_diff_names_each_change),
		cmocka_unit_test_setup_teardown(test_reload_records_only_what_changed, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_trail_catches_up_across_mounts, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_catch_up_in_parts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_start_catches_up_before_reads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_start_cut_short_loses_nothing, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
