/* strlist: an owned, growable list of strings. */
#ifndef SKILLFS_STRLIST_H
#define SKILLFS_STRLIST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct strlist {
	char **items;
	size_t n;
	size_t cap;
};

/* Appends a copy of s. Returns 0 or -1 on allocation failure. */
int strlist_add(struct strlist *l, const char *s);
/* Appends a printf-formatted string. Returns 0 or -1. */
int strlist_addf(struct strlist *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Takes ownership of s (freed on failure). Returns 0 or -1. */
int strlist_add_owned(struct strlist *l, char *s);
/* True when s is in the list (exact match). */
bool strlist_has(const struct strlist *l, const char *s);
/* True when a and b hold the same strings in the same order. */
bool strlist_equal(const struct strlist *a, const struct strlist *b);
/* Appends copies of every item of src. Returns 0 or -1. */
int strlist_extend(struct strlist *l, const struct strlist *src);
/* Gives back the room beyond the items (a list kept long, such as a
 * skill's warnings: it grows 8 at a time); when the allocator cannot, the
 * list stays as it was. */
void strlist_fit(struct strlist *l);
/* Sorts the list bytewise (strcmp order). */
void strlist_sort(struct strlist *l);
/* Sorts the list (strlist_sort) and drops repeated items. */
void strlist_sort_unique(struct strlist *l);
/* True when s is in l, a list sorted by strlist_sort. O(log n). */
bool strlist_sorted_has(const struct strlist *l, const char *s);
/* The list as a JSON array of strings (a new reference), or NULL when out
 * of memory or an item is not valid UTF-8. */
json_t *strlist_to_json(const struct strlist *l);
/* Removes the first item equal to s (a no-op when there is none). */
void strlist_remove(struct strlist *l, const char *s);
/* A NULL-terminated array of the items (borrowed; free the array only), as
 * argv and envp want, or NULL on ENOMEM. */
const char **strlist_to_argv(const struct strlist *l);
/* Frees every item and the array; leaves l empty and reusable. */
void strlist_free(struct strlist *l);

#endif
