/* grow: room in a growable array (items, n in use, cap allocated). */
#ifndef SKILLFS_GROW_H
#define SKILLFS_GROW_H

#include <stddef.h>

/* The array items (n of cap elements of size bytes in use) with room for
 * one more: items itself while n < *cap, else items reallocated to twice
 * *cap (first elements when there were none), *cap updated. NULL when
 * memory ran out: items and *cap are then unchanged, still the caller's. */
void *grow(void *items, size_t *cap, size_t n, size_t size, size_t first);

#endif
