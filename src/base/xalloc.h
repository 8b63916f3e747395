/*
 * xalloc: allocation that cannot return NULL.
 *
 * Running out of memory is not an input error a caller can act on, so these abort with a message
 * instead of returning NULL. Everything else in kcsi reports errors and never aborts.
 */
#ifndef KCSI_BASE_XALLOC_H
#define KCSI_BASE_XALLOC_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
void *xmemdup(const void *p, size_t n);

#endif
