/* SPDX-License-Identifier: MIT */
/*
 * Request data: deep copies (a running job keeps its own shape) and reading a request of any
 * version the library accepts. Private. Model side: topology, cluster and frag may include
 * it; resolving a request is request.h's (the solver's).
 */
#ifndef TP_REQUEST_DATA_H
#define TP_REQUEST_DATA_H

#include "common.h"

/* The size of a tp_request of a version the library reads (1 .. TP_REQUEST_VERSION), 0 for
 * any other version. */
size_t tp_request_size(unsigned version);

/* *src read as the version it says into *dst at the current version: the fields an older
 * version lacks take their TP_REQUEST_INIT defaults. Reads no byte past src's own version.
 * src->version must be one tp_request_size() accepts. */
void tp_request_read(const tp_request *src, tp_request *dst);

/* The size of a tp_step_model of a version the library reads (1 .. TP_STEP_MODEL_VERSION), 0
 * for any other version. */
size_t tp_step_model_size(unsigned version);

/* Copy *src with every string and array it points to into one allocation. The copy's
 * `version` is TP_REQUEST_VERSION. src->version must be one tp_request_size() accepts.
 * Returns NULL when out of memory. */
tp_request *tp_request_dup(const tp_allocator *a, const tp_request *src);

/* Release a copy made by tp_request_dup (NULL is fine). */
void tp_request_free(const tp_allocator *a, tp_request *r);

#endif
