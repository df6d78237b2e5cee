/* grow: room in a growable array (see grow.h). */
#include "grow.h"

#include <stdint.h>
#include <stdlib.h>

void *grow(void *items, size_t *cap, size_t n, size_t size, size_t first)
{
	if (n < *cap)
		return items;
	size_t ncap = *cap ? *cap * 2 : first;
	if (ncap < *cap || ncap > SIZE_MAX / size)
		return NULL;
	void *p = realloc(items, ncap * size);
	if (p)
		*cap = ncap;
	return p;
}
