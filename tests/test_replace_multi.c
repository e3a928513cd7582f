/* SPDX-License-Identifier: MIT */
/*
 * tp_replace with several failed nodes of one job at once, and what it says when repair is
 * impossible.
 */
#include <stdio.h>

#include "testutil.h"

Test(replace_multi, placeholder)
{
	cr_assert(1);
}
