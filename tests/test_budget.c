/* Tests of core/budget (runs.budget, DESIGN.md section 7) and core/size
 * (the sizes the config file writes, "64MiB"). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "budget.h"
#include "size.h"
#include "store.h"
#include "testutil.h"

/* ---- size_parse ---------------------------------------------------------- */

static uint64_t size_ok(const char *text)
{
	uint64_t v = 0;
	if (size_parse(text, UINT64_MAX, &v) != 0)
		fail_msg("'%s' was refused", text);
	return v;
}

static void size_bad(const char *text)
{
	uint64_t v = 12345;
	if (size_parse(text, UINT64_MAX, &v) == 0)
		fail_msg("'%s' was accepted as %llu", text ? text : "(null)", (unsigned long long)v);
	assert_int_equal(v, 12345); /* untouched */
}

static void test_size_numbers_and_binary_units(void **state)
{
	(void)state;
	assert_int_equal(size_ok("1"), 1);
	assert_int_equal(size_ok("67108864"), 67108864);
	assert_int_equal(size_ok("64MiB"), (uint64_t)64 << 20);
	assert_int_equal(size_ok("512KiB"), 512 * 1024);
	assert_int_equal(size_ok("1GiB"), (uint64_t)1 << 30);
	assert_int_equal(size_ok("2TiB"), (uint64_t)2 << 40);
	assert_int_equal(size_ok("100B"), 100);
	assert_int_equal(size_ok(" 64 MiB "), (uint64_t)64 << 20);
	assert_int_equal(size_ok("3\tkib"), 3 * 1024);
	assert_int_equal(size_ok("1mib"), 1 << 20);
	assert_int_equal(size_ok("007"), 7);
}

static void test_size_refuses_what_is_not_a_size(void **state)
{
	(void)state;
	const char *bad[] = { "", " ", "0", "0MiB", "-1", "+1", "1.5MiB", "MiB",
			      "64MB", "64M", "64 K", "64kb", "64 MiB x", "64MiBs",
			      "64Mi", "6 4", "0x10", "1e6",
			      "18446744073709551616", /* 2^64 */
			      "16777216TiB",          /* 2^64 bytes */
			      "99999999999999999999999GiB" };
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
		size_bad(bad[i]);
	size_bad(NULL);
}

static void test_size_max_is_inclusive(void **state)
{
	(void)state;
	uint64_t v = 0;
	assert_int_equal(size_parse("1KiB", 1024, &v), 0);
	assert_int_equal(v, 1024);
	assert_int_equal(size_parse("1025", 1024, &v), -1);
	assert_int_equal(size_parse("8EiB", UINT64_MAX, &v), -1); /* no EiB */
	assert_int_equal(size_parse("8388607TiB", INT64_MAX, &v), 0);
	assert_int_equal(v, (uint64_t)8388607 << 40);
	assert_int_equal(size_parse("8388608TiB", INT64_MAX, &v), -1); /* 2^63 */
	assert_int_equal(size_parse("18446744073709551615", UINT64_MAX, &v), 0);
	assert_int_equal(v, UINT64_MAX);
}

/* ---- budget -------------------------------------------------------------- */

static const struct run_budget small = {
	.model_calls = 3, .tool_calls_per_turn = 2, .subagents = 2, .depth = 2,
	.seconds = 100, .stored_bytes = 1000,
};

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A budget over a fresh store's fresh running run. */
struct fx {
	char *dir;
	struct store *st;
	struct budget b;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof *f);
	assert_non_null(f);
	f->dir = test_tmpdir("skillfs-budget");
	char *db = test_join(f->dir, "state.db");
	char *err = NULL;
	f->st = store_open(db, &err);
	free(db);
	assert_non_null(f->st);
	json_t *none = json_array();
	assert_int_equal(store_run_create(f->st, "r", NULL), 0);
	assert_int_equal(store_run_enqueue(f->st, "r", "default", "p", none, none, NULL,
					   NULL), 0);
	json_decref(none);
	assert_int_equal(store_run_transition(f->st, "r", RUNSTATE_QUEUED, RUNSTATE_RUNNING,
					      &(struct run_change){ .chat_id = "main" },
					      NULL), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;
	store_close(f->st);
	test_rm_tree(f->dir);
	free(f);
	return 0;
}

static void start(struct fx *f, const struct run_budget *lim, int64_t started_at)
{
	char *err = NULL;
	assert_int_equal(budget_start(&f->b, lim, f->st, "r", started_at, &err), 0);
	assert_null(budget_exceeded(&f->b));
}

static void test_budget_model_calls_admit_the_limit_and_no_more(void **state)
{
	struct fx *f = *state;
	start(f, &small, 0);
	for (int i = 0; i < 3; i++) {
		assert_true(budget_check_model_call(&f->b));
		budget_count_model_call(&f->b);
	}
	assert_false(budget_check_model_call(&f->b));
	assert_string_equal(budget_exceeded(&f->b),
			    "budget exceeded: runs.budget.model_calls (3 model calls)");
	/* reached stays reached: nothing else goes on either */
	assert_false(budget_check_tool_calls(&f->b, 0));
	assert_false(budget_check_stored(&f->b, 0));
	assert_string_equal(budget_exceeded(&f->b),
			    "budget exceeded: runs.budget.model_calls (3 model calls)");
}

/* Calls and bytes committed before (a crash, a wait) count from the start. */
static void test_budget_starts_from_what_the_store_holds(void **state)
{
	struct fx *f = *state;
	json_t *a = json_pack("{s:s, s:s}", "role", "assistant", "content", "x");
	json_t *u = json_pack("{s:s, s:s}", "role", "user", "content", "hello");
	assert_int_equal(store_message_append(f->st, "r", "main", u, NULL, NULL), 0);
	assert_int_equal(store_message_append(f->st, "r", "main", a, NULL, NULL), 0);
	assert_int_equal(store_message_append(f->st, "r", "skill-s-1", a, NULL, NULL), 0);
	assert_int_equal(store_chat_create(f->st, "r", "skill-s-1", "main", "s", NULL,
					   NULL), 0);
	size_t bytes = store_message_bytes(u) + 2 * store_message_bytes(a);
	json_decref(a);
	json_decref(u);
	struct run_budget lim = small;
	lim.stored_bytes = (int64_t)bytes + 10;
	start(f, &lim, 0);
	assert_int_equal(f->b.model_calls, 2);
	assert_int_equal(f->b.subagents, 1);
	assert_int_equal(f->b.stored_bytes, (int64_t)bytes);
	assert_true(budget_check_model_call(&f->b)); /* the third */
	budget_count_model_call(&f->b);
	assert_false(budget_check_model_call(&f->b));

	start(f, &lim, 0);
	assert_true(budget_check_subagent(&f->b, 1));
	budget_count_subagent(&f->b);
	assert_false(budget_check_subagent(&f->b, 1));
	assert_string_equal(budget_exceeded(&f->b),
			    "budget exceeded: runs.budget.subagents (2 sub-agents)");

	start(f, &lim, 0);
	assert_true(budget_check_stored(&f->b, 10));
	budget_count_stored(&f->b, 4);
	assert_true(budget_check_stored(&f->b, 6));
	assert_false(budget_check_stored(&f->b, 7));
	char want[128];
	snprintf(want, sizeof want, "budget exceeded: runs.budget.stored_bytes (%zu bytes)",
		 bytes + 10);
	assert_string_equal(budget_exceeded(&f->b), want);
}

static void test_budget_tool_calls_per_turn(void **state)
{
	struct fx *f = *state;
	start(f, &small, 0);
	assert_true(budget_check_tool_calls(&f->b, 0));
	assert_true(budget_check_tool_calls(&f->b, 2));
	assert_false(budget_check_tool_calls(&f->b, 3));
	assert_string_equal(budget_exceeded(&f->b), "budget exceeded: "
			    "runs.budget.tool_calls_per_turn (2 tool calls per turn)");
}

/* The main chat has depth 0, so depth 2 admits a sub-agent of a sub-agent
 * of the main chat (depth 2) and refuses one level more. */
static void test_budget_depth_counts_from_the_main_chat(void **state)
{
	struct fx *f = *state;
	start(f, &small, 0);
	assert_true(budget_check_subagent(&f->b, 1));
	assert_true(budget_check_subagent(&f->b, 2));
	assert_false(budget_check_subagent(&f->b, 3));
	assert_string_equal(budget_exceeded(&f->b),
			    "budget exceeded: runs.budget.depth (2 levels of sub-agents)");
	struct run_budget one = small;
	one.depth = 1;
	start(f, &one, 0);
	assert_true(budget_check_subagent(&f->b, 1));
	assert_false(budget_check_subagent(&f->b, 2));
	assert_string_equal(budget_exceeded(&f->b),
			    "budget exceeded: runs.budget.depth (1 level of sub-agents)");
}

/* The clock runs from the run's first start, not from when it was loaded. */
static void test_budget_seconds_since_the_run_started(void **state)
{
	struct fx *f = *state;
	start(f, &small, now_ns() - (int64_t)99 * 1000000000);
	assert_true(budget_check_time(&f->b));
	start(f, &small, now_ns() - (int64_t)100 * 1000000000);
	assert_false(budget_check_time(&f->b));
	assert_string_equal(budget_exceeded(&f->b),
			    "budget exceeded: runs.budget.seconds (100 seconds)");
	struct run_budget huge = small;
	huge.seconds = LONG_MAX; /* no overflow */
	start(f, &huge, 1);
	assert_true(budget_check_time(&f->b));
	start(f, &small, 0); /* 0: the run starts now */
	assert_true(budget_check_time(&f->b));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_size_numbers_and_binary_units),
		cmocka_unit_test(test_size_refuses_what_is_not_a_size),
		cmocka_unit_test(test_size_max_is_inclusive),
		cmocka_unit_test_setup_teardown(test_budget_model_calls_admit_the_limit_and_no_more,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_budget_starts_from_what_the_store_holds,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_budget_tool_calls_per_turn, setup, teardown),
		cmocka_unit_test_setup_teardown(test_budget_depth_counts_from_the_main_chat,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_budget_seconds_since_the_run_started,
						setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
