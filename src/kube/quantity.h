/*
 * kube quantity: Kubernetes resource quantities ("10Gi", "1G", "500M", "1.5Gi", "1e3", "100m").
 *
 * kcsi only needs quantities as whole bytes (volume capacities), so a quantity is parsed into an
 * int64 of bytes, rounding a fractional result up as resource.Quantity.Value() does ("100m" is 1,
 * "1.5" is 2). Values beyond int64 and malformed text are rejected with a reason.
 *
 * Canonical form: binary suffixes (Ki..Ei) when the value is a multiple of 1024 and the caller
 * asks for binary, otherwise decimal suffixes (k, M, G, T, P, E) for exact multiples of 1000,
 * otherwise plain digits. "0" is "0".
 */
#ifndef KCSI_KUBE_QUANTITY_H
#define KCSI_KUBE_QUANTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KUBE_QUANTITY_BUFLEN 32

/* Returns 0 and sets *bytes, or -1 with a reason in err. */
int kube_quantity_parse(const char *s, int64_t *bytes, char *err, size_t errlen);
/* Formats bytes canonically (see above) into buf. */
void kube_quantity_format(int64_t bytes, bool binary, char *buf, size_t len);

#endif
