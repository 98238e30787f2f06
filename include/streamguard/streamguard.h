/*
 * streamguard - guards for streaming HTTP responses (AI token streams).
 *
 * This umbrella header declares the sans-I/O parts of the library: the core
 * (time, errors, outcomes, budget, stream guard), the framing parsers, the
 * operation policy and sg_stream (framing joined to a guard: what every
 * transport, or your own event loop, feeds body bytes into).  It includes no third-party
 * header.  The transports have their own headers: <streamguard/curl.h>,
 * <streamguard/h2.h>, and the intent ledger <streamguard/ledger.h>.
 */
#ifndef STREAMGUARD_STREAMGUARD_H
#define STREAMGUARD_STREAMGUARD_H

#include <streamguard/core.h>
#include <streamguard/framing.h>
#include <streamguard/policy.h>
#include <streamguard/stream.h>

#endif /* STREAMGUARD_STREAMGUARD_H */
