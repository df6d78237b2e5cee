/* prompt: the main agent's system prompt (DESIGN.md section 4, R9, R14):
 * base prompt + skill block (knowledge skills, budget skills.maxBytes) +
 * <available_skills> (action skills, budget skills.listingMaxBytes). */
#ifndef SKILLFS_PROMPT_H
#define SKILLFS_PROMPT_H

#include <stddef.h>

#include "buf.h"
#include "catalog.h"
#include "config.h"
#include "grants.h"
#include "strlist.h"

/* The frame of one skill-block section. */
#define PROMPT_SKILL_OPEN "<skill_reference"
#define PROMPT_SKILL_CLOSE "</skill_reference>"

/* A description in <available_skills> holds at most this many characters:
 * a longer one is cut at a word boundary and ends in PROMPT_ELLIPSIS (the
 * ellipsis counted), with a warning naming the skill and the limit. */
#define PROMPT_DESCRIPTION_MAX 200
#define PROMPT_ELLIPSIS "\xE2\x80\xA6" /* U+2026 */

/* The constant first part of every system prompt. */
extern const char prompt_base[];

struct prompt {
	char *skill_block;  /* "" when no knowledge skill is included; NULL
	                       when error is set */
	size_t skill_block_len;
	char *available;    /* "" when no action skill is listed */
	size_t available_len;
	char *system;       /* base + skill block + available skills; NULL
	                       when error is set */
	size_t system_len;
	/* 0; or why the skill block (and so the system prompt) could not be
	 * assembled: the body of knowledge skill error_skill could not be
	 * read (skill_read_text), such as ESTALE for a SKILL.md changed on
	 * disk since it was loaded (a reload follows). included, dropped and
	 * the block's warnings are then empty. */
	int error;
	char *error_skill;
	struct strlist included; /* knowledge skills in the block, in order */
	struct strlist dropped;  /* knowledge skills dropped for the budget (R9) */
	struct strlist listed;   /* action skills in <available_skills> */
	size_t unlisted;         /* listable skills cut by the listing budget */
	struct strlist warnings; /* one per budget drop (skill block or listing)
				    and per description shortened in the
				    listing, naming skill and limit */
};

/* Appends body to out with every frame marker defused: a '<' that starts
 * (after optional blanks and '/') the word skill_reference, in any case, is
 * written as "&lt;", so a body can neither close its own frame nor open a
 * fake one. Returns 0 or -1. */
int prompt_defuse(struct buf *out, const char *body, size_t len);

/* Appends s XML-escaped (& < > " '), every control character (newline and
 * tab included) as a space, so the text stays on one line. Returns 0 or -1. */
int prompt_xml_escape(struct buf *out, const char *s, size_t len);

/* The byte length of the longest prefix of s holding at most max UTF-8
 * characters. */
size_t prompt_utf8_prefix(const char *s, size_t len, size_t max);

/* The byte length of the part of description d (len bytes) that
 * <available_skills> shows: len when d holds at most
 * PROMPT_DESCRIPTION_MAX characters; else the longest prefix of at most
 * PROMPT_DESCRIPTION_MAX - 1 characters (room for the ellipsis) ending at
 * a word boundary, blanks before the cut dropped (a first word longer than
 * that is cut inside). */
size_t prompt_description_cut(const char *d, size_t len);

/* Assembles the prompt for the effective skills eff (catalogue indexes, in
 * effective order) under the allow-list g (which decides the invocation
 * text: run_skill when g offers it, else /skill:run:<name>). Budgets come
 * from c->max_bytes and c->listing_max_bytes (a value <= 0 means the
 * default). The knowledge skills' bodies are read from their files
 * (skill_read_text); one that cannot be read leaves out->error set (see
 * struct prompt). Returns 0 and fills *out (free with prompt_free), or -1
 * on ENOMEM. O(n) in the number of effective skills plus their sizes. */
int prompt_build(const struct config *c, const struct catalog *cat,
		 const size_t *eff, size_t neff, const struct grants *g,
		 struct prompt *out);

/* Frees everything and leaves p empty. NULL is ignored. */
void prompt_free(struct prompt *p);

#endif
