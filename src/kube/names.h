/*
 * kube names: the syntax rules Kubernetes applies to object names, label keys and label values,
 * with kube-apiserver's wording for what is wrong. Pure functions, no allocation.
 *
 *   DNS-1123 subdomain  lower-case alphanumerics, '-' and '.', alphanumeric at both ends of every
 *                       dot-separated part, at most 253 characters (most object names)
 *   DNS-1123 label      the same without '.', at most 63 characters (namespaces, ...)
 *   label value         empty, or at most 63 alphanumerics, '-', '_', '.', alphanumeric at both ends
 *   qualified name      a label key: [DNS-1123 subdomain "/"] name, name as a non-empty label value
 */
#ifndef KCSI_KUBE_NAMES_H
#define KCSI_KUBE_NAMES_H

#include <stdbool.h>
#include <stddef.h>

/* True when valid; otherwise false with kube-apiserver's reason in err (when err is not NULL). */
bool kube_name_is_dns1123_subdomain(const char *s, char *err, size_t errlen);
bool kube_name_is_dns1123_label(const char *s, char *err, size_t errlen);
/* The first n bytes of s as a label value / qualified name (label key). */
bool kube_name_is_label_value(const char *s, size_t n);
bool kube_name_is_qualified(const char *s, size_t n);

/* kube-apiserver's reasons for the last two, to follow a quoted value or key in a message. */
#define KUBE_LABEL_VALUE_RULE \
	"a valid label must be an empty string or consist of alphanumeric characters, '-', '_' " \
	"or '.', and must start and end with an alphanumeric character"
#define KUBE_QUALIFIED_NAME_RULE \
	"a qualified name must consist of alphanumeric characters, '-', '_' or '.', with an " \
	"optional DNS subdomain prefix and '/'"

#endif
