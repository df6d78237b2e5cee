/* Tests for core/runstate: names and the run state machine (DESIGN.md
 * section 6). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "runstate.h"

/* The design's moves, written out pair by pair (independently of the
 * implementation's bit table). */
static const struct {
	const char *from, *to;
} legal[] = {
	{"created", "queued"},
	{"created", "failed"},
	{"created", "cancelled"},
	{"queued", "running"},
	{"queued", "cancelled"},
	{"queued", "failed"},
	{"running", "waiting_for_approval"},
	{"running", "waiting_for_input"},
	{"running", "completed"},
	{"running", "failed"},
	{"running", "cancelled"},
	{"running", "queued"},
	{"waiting_for_approval", "running"},
	{"waiting_for_approval", "cancelled"},
	{"waiting_for_approval", "failed"},
	{"waiting_for_input", "running"},
	{"waiting_for_input", "cancelled"},
	{"waiting_for_input", "failed"},
};

static const char *const all_names[] = {
	"created", "queued", "running", "waiting_for_approval",
	"waiting_for_input", "completed", "failed", "cancelled",
};

static bool listed_legal(const char *from, const char *to)
{
	for (size_t i = 0; i < sizeof legal / sizeof *legal; i++)
		if (!strcmp(legal[i].from, from) && !strcmp(legal[i].to, to))
			return true;
	return false;
}

static void test_section6_names_round_trip(void **state)
{
	(void)state;
	assert_int_equal(sizeof all_names / sizeof *all_names, RUNSTATE_COUNT);
	for (int i = 0; i < RUNSTATE_COUNT; i++) {
		enum runstate s = (enum runstate)-1;
		assert_string_equal(runstate_name((enum runstate)i), all_names[i]);
		assert_true(runstate_parse(all_names[i], &s));
		assert_int_equal(s, i);
	}
}

static void test_section6_parse_rejects_unknown_names(void **state)
{
	(void)state;
	const char *bad[] = {"", "Queued", "QUEUED", "queued ", " queued",
			     "waiting", "done", "invalid", "queue"};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		enum runstate s = RUNSTATE_RUNNING;
		assert_false(runstate_parse(bad[i], &s));
		assert_int_equal(s, RUNSTATE_RUNNING); /* untouched */
	}
	enum runstate s = RUNSTATE_RUNNING;
	assert_false(runstate_parse(NULL, &s));
	assert_string_equal(runstate_name((enum runstate)RUNSTATE_COUNT),
			    "invalid");
	assert_string_equal(runstate_name((enum runstate)-1), "invalid");
}

/* Every one of the 64 (from, to) pairs: legal exactly when listed. */
static void test_section6_every_transition_pair(void **state)
{
	(void)state;
	int nlegal = 0;
	for (int f = 0; f < RUNSTATE_COUNT; f++) {
		for (int t = 0; t < RUNSTATE_COUNT; t++) {
			bool want = listed_legal(all_names[f], all_names[t]);
			bool got = runstate_can_move((enum runstate)f,
						     (enum runstate)t);
			if (want != got)
				fail_msg("%s -> %s: expected %s", all_names[f],
					 all_names[t],
					 want ? "legal" : "illegal");
			nlegal += got;
		}
	}
	assert_int_equal(nlegal, (int)(sizeof legal / sizeof *legal));
}

static void test_section6_no_state_moves_to_itself(void **state)
{
	(void)state;
	for (int i = 0; i < RUNSTATE_COUNT; i++)
		assert_false(runstate_can_move((enum runstate)i,
					       (enum runstate)i));
}

static void test_section6_terminal_states_have_no_exit(void **state)
{
	(void)state;
	for (int f = 0; f < RUNSTATE_COUNT; f++) {
		if (!runstate_is_terminal((enum runstate)f))
			continue;
		for (int t = 0; t < RUNSTATE_COUNT; t++)
			assert_false(runstate_can_move((enum runstate)f,
						       (enum runstate)t));
	}
}

static void test_section6_out_of_range_never_moves(void **state)
{
	(void)state;
	enum runstate bad[] = {(enum runstate)-1, (enum runstate)RUNSTATE_COUNT,
			       (enum runstate)1000};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		for (int s = 0; s < RUNSTATE_COUNT; s++) {
			assert_false(runstate_can_move(bad[i], (enum runstate)s));
			assert_false(runstate_can_move((enum runstate)s, bad[i]));
		}
		assert_false(runstate_is_terminal(bad[i]));
		assert_false(runstate_is_settled(bad[i]));
	}
}

/* `wait` returns on completed, failed, cancelled or a wait for a person. */
static void test_section8_wait_settles_on_terminal_or_person(void **state)
{
	(void)state;
	static const struct {
		enum runstate s;
		bool terminal, waiting, settled;
	} want[] = {
		{RUNSTATE_CREATED, false, false, false},
		{RUNSTATE_QUEUED, false, false, false},
		{RUNSTATE_RUNNING, false, false, false},
		{RUNSTATE_WAITING_FOR_APPROVAL, false, true, true},
		{RUNSTATE_WAITING_FOR_INPUT, false, true, true},
		{RUNSTATE_COMPLETED, true, false, true},
		{RUNSTATE_FAILED, true, false, true},
		{RUNSTATE_CANCELLED, true, false, true},
	};
	assert_int_equal(sizeof want / sizeof *want, RUNSTATE_COUNT);
	for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
		assert_int_equal(runstate_is_terminal(want[i].s), want[i].terminal);
		assert_int_equal(runstate_is_waiting(want[i].s), want[i].waiting);
		assert_int_equal(runstate_is_settled(want[i].s), want[i].settled);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_section6_names_round_trip),
		cmocka_unit_test(test_section6_parse_rejects_unknown_names),
		cmocka_unit_test(test_section6_every_transition_pair),
		cmocka_unit_test(test_section6_no_state_moves_to_itself),
		cmocka_unit_test(test_section6_terminal_states_have_no_exit),
		cmocka_unit_test(test_section6_out_of_range_never_moves),
		cmocka_unit_test(test_section8_wait_settles_on_terminal_or_person),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
