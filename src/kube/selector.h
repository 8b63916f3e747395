/*
 * kube selector: Kubernetes label and field selectors, parsed once here for every part of kcsi
 * (the controllers match cached records, kube-emulator matches stored JSON) with one grammar and
 * one set of error messages.
 *
 * Label selectors (labels.Parse): requirements separated by commas, each one of
 *   key=value  key==value  key!=value  key in (v1,v2)  key notin (v1,v2)  key  !key
 *   key>N  key<N   (integer comparisons)
 * Keys are qualified names ([DNS subdomain/]name), values label values (kube/names.h); a word
 * runs until whitespace or one of ! , = < > ( ). Whitespace around tokens is allowed. Errors say
 * what is wrong and where, in kube-apiserver's terms: `invalid label selector "app db": at
 * position 4: found 'db', expected an operator (=, ==, !=, in, notin, >, <)`.
 *
 * Field selectors (fields.ParseSelector): path=value, path==value, path!=value separated by
 * commas, with `\` escaping `,`, `=` and `\` in values. Which paths exist is the caller's
 * decision (kube_selector_key() lists them), as it differs per resource.
 *
 * An empty selector matches everything. A parsed selector is immutable and owned by the caller
 * (kube_selector_free); matching is thread-safe. Matching asks the caller for each key's value,
 * so that each side matches its own representation (records here, JSON in the emulator).
 */
#ifndef KCSI_KUBE_SELECTOR_H
#define KCSI_KUBE_SELECTOR_H

#include <stdbool.h>
#include <stddef.h>

#include "kube/objects.h"

struct kube_selector;

/* Parse. A new selector, or NULL with the reason in err. NULL text is the empty selector. */
struct kube_selector *kube_selector_parse(const char *text, char *err, size_t errlen);
struct kube_selector *kube_field_selector_parse(const char *text, char *err, size_t errlen);
void kube_selector_free(struct kube_selector *sel);

/* True when the selector has no requirements (NULL is empty). */
bool kube_selector_empty(const struct kube_selector *sel);
/* Number of requirements and the key (field selectors: the field path) of requirement i. */
size_t kube_selector_len(const struct kube_selector *sel);
const char *kube_selector_key(const struct kube_selector *sel, size_t i);

/*
 * Matching. lookup returns key's value in the object (tmp, tmplen: room for a value it has to
 * format), or NULL when the object has no such key. A NULL selector matches everything.
 */
typedef const char *(*kube_selector_lookup_fn)(void *arg, const char *key, char *tmp,
					       size_t tmplen);
bool kube_selector_match(const struct kube_selector *sel, kube_selector_lookup_fn lookup,
			 void *arg);
/* Matches a label set given as key/value pairs. */
bool kube_selector_matches(const struct kube_selector *sel, const struct kube_kv *labels, size_t n);

#endif
