/*
 * featuregate: --feature-gates checked the way component-base's feature gate checks it, so a
 * gate list that an upstream sidecar accepts is accepted here and one it refuses is refused.
 *
 * A binary knows its own gates (a table it passes in) and the generic ones every upstream
 * sidecar inherits from k8s.io/apiserver and component-base (feature_gates_generic, generated
 * by scripts/gen-featuregates.py), plus AllAlpha and AllBeta, which switch every alpha or beta
 * gate not named explicitly. Values are Go's strconv.ParseBool ("true", "1", "t", "False", ...).
 *
 * Refused, with upstream's message: an unknown name ("unrecognized feature gate: X"), a value
 * that is not a bool ("invalid value of X=v, err: ..."), and a value other than the default for a
 * gate locked to it ("cannot set feature gate X to false, feature is locked to true"). Setting a
 * GA or deprecated gate logs a warning, as upstream does.
 */
#ifndef KCSI_BASE_FEATUREGATE_H
#define KCSI_BASE_FEATUREGATE_H

#include <stdbool.h>
#include <stddef.h>

struct flag_map;

enum feature_stage { FG_ALPHA, FG_BETA, FG_GA, FG_DEPRECATED };

struct feature_gate {
	const char *name;
	bool def;
	enum feature_stage stage;
	bool locked; /* LockToDefault: only the default may be given */
};

extern const struct feature_gate feature_gates_generic[];
extern const size_t feature_gates_generic_len;

/* Checks every gate in m against own[0..n) and the generic gates; 0, or -1 with err. */
int feature_gates_check(const struct flag_map *m, const struct feature_gate *own, size_t n,
			char *err, size_t errlen);
/*
 * The value of gate `name` of own[]: as given, else as AllAlpha/AllBeta set it for its stage,
 * else its default. m must have passed feature_gates_check(); name must be in own[].
 */
bool feature_gate_enabled(const struct flag_map *m, const struct feature_gate *own, size_t n,
			  const char *name);

#endif
