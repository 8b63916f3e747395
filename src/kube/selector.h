/*
 * kube selector: Kubernetes label selectors, parsed and matched on the client.
 *
 * Syntax (labels.Parse): requirements separated by commas, each one of
 *   key=value  key==value  key!=value  key in (v1,v2)  key notin (v1,v2)  key  !key
 *   key>N  key<N   (integer comparisons)
 * Keys are [prefix/]name (name: at most 63 characters, alphanumeric at both ends, '-', '_', '.'
 * inside; prefix: a DNS subdomain); values are empty or follow the name rule. Whitespace
 * around tokens is allowed. An empty selector matches everything.
 *
 * A parsed selector is immutable and owned by the caller (kube_selector_free); matching is
 * thread-safe. Errors say what is wrong and where ("at position 7: expected a value").
 */
#ifndef KCSI_KUBE_SELECTOR_H
#define KCSI_KUBE_SELECTOR_H

#include <stdbool.h>
#include <stddef.h>

#include "kube/objects.h"

struct kube_selector;

struct kube_selector *kube_selector_parse(const char *text, char *err, size_t errlen);
/* Matches a label set given as key/value pairs. */
bool kube_selector_matches(const struct kube_selector *sel, const struct kube_kv *labels, size_t n);
/* True when the selector has no requirements. */
bool kube_selector_empty(const struct kube_selector *sel);
void kube_selector_free(struct kube_selector *sel);

#endif
