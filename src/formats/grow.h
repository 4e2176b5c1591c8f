/*
 * grow.h - room for one more element in an array that doubles as it fills.
 */
#ifndef QG_GROW_H
#define QG_GROW_H

#include <stdlib.h>

/*
 * ARRAY (of *CAP elements of ELEM bytes, N in use) with room for N + 1:
 * itself, or doubled from FIRST when it is full (and *CAP updated).  NULL
 * without memory: ARRAY and *CAP are left as they were.
 */
static inline void *qg_grow(void *array, size_t *cap, size_t n, size_t elem, size_t first)
{
	if (n < *cap)
		return array;
	size_t ncap = *cap ? 2 * *cap : first;
	void *p = realloc(array, ncap * elem);
	if (p)
		*cap = ncap;
	return p;
}

#endif
