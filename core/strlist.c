#include "strlist.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

int strlist_add_owned(struct strlist *l, char *s)
{
	if (!s)
		return -1;
	char **p = grow(l->items, &l->cap, l->n, sizeof *p, 8);
	if (!p) {
		free(s);
		return -1;
	}
	l->items = p;
	l->items[l->n++] = s;
	return 0;
}

void strlist_fit(struct strlist *l)
{
	if (l->n == l->cap)
		return;
	if (!l->n) {
		free(l->items);
		l->items = NULL;
		l->cap = 0;
		return;
	}
	char **p = realloc(l->items, l->n * sizeof *p);
	if (p) {
		l->items = p;
		l->cap = l->n;
	}
}

int strlist_add(struct strlist *l, const char *s)
{
	return strlist_add_owned(l, strdup(s));
}

int strlist_addf(struct strlist *l, const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, fmt);
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -1;
	return strlist_add_owned(l, s);
}

bool strlist_has(const struct strlist *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->items[i], s) == 0)
			return true;
	return false;
}

bool strlist_equal(const struct strlist *a, const struct strlist *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->items[i], b->items[i]) != 0)
			return false;
	return true;
}

int strlist_extend(struct strlist *l, const struct strlist *src)
{
	for (size_t i = 0; i < src->n; i++)
		if (strlist_add(l, src->items[i]) < 0)
			return -1;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void strlist_sort(struct strlist *l)
{
	if (l->n > 1)
		qsort(l->items, l->n, sizeof *l->items, cmp_str);
}

void strlist_sort_unique(struct strlist *l)
{
	strlist_sort(l);
	size_t u = 0;
	for (size_t i = 0; i < l->n; i++) {
		if (u && strcmp(l->items[u - 1], l->items[i]) == 0)
			free(l->items[i]);
		else
			l->items[u++] = l->items[i];
	}
	l->n = u;
}

bool strlist_sorted_has(const struct strlist *l, const char *s)
{
	return l->n && bsearch(&s, l->items, l->n, sizeof *l->items, cmp_str);
}

json_t *strlist_to_json(const struct strlist *l)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < l->n; i++)
		if (json_array_append_new(a, json_string(l->items[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

void strlist_free(struct strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->items[i]);
	free(l->items);
	l->items = NULL;
	l->n = l->cap = 0;
}

void strlist_remove(struct strlist *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->items[i], s) == 0) {
			free(l->items[i]);
			memmove(&l->items[i], &l->items[i + 1], (l->n - i - 1) * sizeof *l->items);
			l->n--;
			return;
		}
}

const char **strlist_to_argv(const struct strlist *l)
{
	const char **v = malloc((l->n + 1) * sizeof *v);
	if (!v)
		return NULL;
	for (size_t i = 0; i < l->n; i++)
		v[i] = l->items[i];
	v[l->n] = NULL;
	return v;
}
