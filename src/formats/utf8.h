/*
 * utf8.h - whether bytes are well-formed UTF-8 (RFC 3629): no overlong
 * forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF.  Names
 * that reach logs, listings and other users' terminals are held to it.
 */
#ifndef QG_UTF8_H
#define QG_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Whether S[0..N) is well-formed UTF-8 (an empty string is). */
static inline bool qg_utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + n;

	while (p < end) {
		unsigned char c = *p++;
		unsigned char lo = 0x80, hi = 0xbf;	/* the first continuation byte's range */
		int more;

		if (c < 0x80)
			continue;
		if (c >= 0xc2 && c <= 0xdf)
			more = 1;
		else if (c >= 0xe0 && c <= 0xef) {
			more = 2;
			if (c == 0xe0)
				lo = 0xa0;	/* below: overlong */
			else if (c == 0xed)
				hi = 0x9f;	/* above: a surrogate */
		} else if (c >= 0xf0 && c <= 0xf4) {
			more = 3;
			if (c == 0xf0)
				lo = 0x90;	/* below: overlong */
			else if (c == 0xf4)
				hi = 0x8f;	/* above: past U+10FFFF */
		} else
			return false;		/* a continuation byte, 0xc0/0xc1, or 0xf5.. */
		if (end - p < more || *p < lo || *p > hi)
			return false;
		p++;
		while (--more > 0)
			if (*p < 0x80 || *p++ > 0xbf)
				return false;
	}
	return true;
}

#endif /* QG_UTF8_H */
