/* SPDX-License-Identifier: MIT */
/* The error table, the version and name validation (common.c). */
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "testutil.h"

Test(common, every_error_code_has_a_name_and_text)
{
#define CHECK_CODE(name, value, text)                                                          \
	cr_assert_eq(TP_##name, (value));                                                          \
	cr_assert_str_eq(tp_err_name(TP_##name), #name);                                           \
	cr_assert_str_eq(tp_strerror(TP_##name), text);
	TP_ERRNO_MAP(CHECK_CODE)
#undef CHECK_CODE
	cr_assert_str_eq(tp_err_name(0), "OK");
	cr_assert_str_eq(tp_strerror(0), "success");
}

/* TP_EINTERNAL is the code for "the library found itself inconsistent": distinct from
 * TP_ECORRUPT (what tp_cluster_check() reports) and named like the others. */
Test(common, internal_error_has_its_own_code)
{
	cr_assert_eq(TP_EINTERNAL, -12);
	cr_assert_neq(TP_EINTERNAL, TP_ECORRUPT);
	cr_assert_str_eq(tp_err_name(TP_EINTERNAL), "EINTERNAL");
	cr_assert(strstr(tp_strerror(TP_EINTERNAL), "internal"));
}

Test(common, unknown_codes)
{
	int unknown[] = {1, -13, -100, 42};
	for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
		cr_assert_str_eq(tp_err_name(unknown[i]), "UNKNOWN");
		cr_assert_str_eq(tp_strerror(unknown[i]), "unknown error");
	}
}

Test(common, version_matches_the_macros)
{
	cr_assert_eq(tp_version(), TP_VERSION_NUMBER);
	cr_assert_eq(TP_VERSION_NUMBER,
	             TP_VERSION_MAJOR * 10000 + TP_VERSION_MINOR * 100 + TP_VERSION_PATCH);
	char want[32];
	snprintf(want, sizeof want, "%d.%d.%d", TP_VERSION_MAJOR, TP_VERSION_MINOR,
	         TP_VERSION_PATCH);
	cr_assert_str_eq(tp_version_string(), want);
	cr_assert_str_eq(TP_VERSION_STRING, want);
}

Test(common, name_problems)
{
	char longest[TP_MAX_NAME + 2];
	memset(longest, 'a', sizeof longest);
	longest[TP_MAX_NAME] = '\0';
	cr_assert_null(tp_name_problem(longest, true));
	longest[TP_MAX_NAME] = 'a';
	longest[TP_MAX_NAME + 1] = '\0';
	cr_assert_str_eq(tp_name_problem(longest, true), "is longer than 255 bytes");

	cr_assert_null(tp_name_problem("rack-1.b_2 x", true));
	cr_assert_null(tp_name_problem("b1/r3", false));
	cr_assert_str_eq(tp_name_problem("b1/r3", true), "contains '/'");
	cr_assert_str_eq(tp_name_problem(NULL, false), "is NULL");
	cr_assert_str_eq(tp_name_problem("", false), "is empty");
	cr_assert_str_eq(tp_name_problem("a\tb", false), "contains a control character");
	cr_assert_str_eq(tp_name_problem("a\x7f", false), "contains a control character");
	cr_assert_null(tp_name_problem("gpu\xc3\xa9", true)); /* UTF-8 is fine */
}
