/*
 * check.h: the minimal test harness for kcsi unit tests.
 *
 * A test file defines test functions and runs them from main() with RUN(fn); each CHECK that
 * fails prints file:line and the expression, and the test program exits 1 at the end. The last
 * line a test program prints is "N passed, M failed".
 */
#ifndef KCSI_TESTS_CHECK_H
#define KCSI_TESTS_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int check_failures;
static int check_tests_passed, check_tests_failed;

#define CHECK(cond) \
	do { \
		if (!(cond)) { \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
			check_failures++; \
		} \
	} while (0)

#define CHECK_INT(a, b) \
	do { \
		long long check_a_ = (long long)(a), check_b_ = (long long)(b); \
		if (check_a_ != check_b_) { \
			fprintf(stderr, "%s:%d: CHECK failed: %s == %s (%lld != %lld)\n", __FILE__, \
				__LINE__, #a, #b, check_a_, check_b_); \
			check_failures++; \
		} \
	} while (0)

#define CHECK_STR(a, b) \
	do { \
		const char *check_a_ = (a), *check_b_ = (b); \
		if (!check_a_ || !check_b_ || strcmp(check_a_, check_b_) != 0) { \
			fprintf(stderr, "%s:%d: CHECK failed: %s == %s (\"%s\" != \"%s\")\n", __FILE__, \
				__LINE__, #a, #b, check_a_ ? check_a_ : "(null)", \
				check_b_ ? check_b_ : "(null)"); \
			check_failures++; \
		} \
	} while (0)

#define RUN(fn) \
	do { \
		int check_before_ = check_failures; \
		fn(); \
		if (check_failures == check_before_) { \
			check_tests_passed++; \
		} else { \
			check_tests_failed++; \
			fprintf(stderr, "FAIL %s\n", #fn); \
		} \
	} while (0)

#define CHECK_DONE() \
	(printf("%d passed, %d failed\n", check_tests_passed, check_tests_failed), \
	 check_tests_failed ? 1 : 0)

#endif
