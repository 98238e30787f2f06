/*
 * streamguard - guards for streaming HTTP responses (AI token streams).
 *
 * This umbrella header declares the stable, third-party-free parts of the
 * library: the core (time, errors, outcomes, budget, stream guard), the
 * framing parsers, sg_stream (framing joined to a guard: what every
 * transport, or your own event loop, feeds body bytes into) and the config
 * that frames its items (<streamguard/stream_config.h>), the policy an
 * operation runs under (<streamguard/policy.h>) and its retries
 * (<streamguard/retry.h>), reading an operation and
 * its report (<streamguard/op.h>), the endpoint health operations share
 * (<streamguard/health.h>) and the HTTP fields the policy reads and
 * writes (<streamguard/http.h>).  The transports have their own headers,
 * <streamguard/curl.h> and <streamguard/h2.h>, the intent ledger
 * <streamguard/ledger.h>, endpoint health shared by processes through
 * PostgreSQL <streamguard/health_pg.h>; driving an operation from a transport of your
 * own is <streamguard/unstable/op.h>, which may change in a minor release.
 */
#ifndef STREAMGUARD_STREAMGUARD_H
#define STREAMGUARD_STREAMGUARD_H

#include <streamguard/core.h>
#include <streamguard/framing.h>
#include <streamguard/health.h>
#include <streamguard/http.h>
#include <streamguard/op.h>
#include <streamguard/policy.h>
#include <streamguard/retry.h>
#include <streamguard/stream.h>
#include <streamguard/stream_config.h>

#endif /* STREAMGUARD_STREAMGUARD_H */
