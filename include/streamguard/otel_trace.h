/*
 * streamguard otel_trace: an operation as OpenTelemetry spans, through
 * the policy's observer seam (libstreamguard-otel; docs/otel.md, "Spans
 * and attributes").
 *
 * One span per operation and a child span per attempt - retries, hedges
 * (won and lost) and fallbacks alike - with the attempt's endpoint,
 * phase, outcome, reason, granted clocks, time to first chunk, usage,
 * partial and discarded flags and who set the limit; backoff sleeps and
 * endpoint waits are events of the operation's span.  Attribute names are
 * OpenTelemetry's GenAI and HTTP semantic conventions where they have one
 * (gen_ai.usage.input_tokens, http.request.resend_count, url.full, ...)
 * and streamguard.* where they do not.  Each attempt's request carries a
 * W3C traceparent that names the attempt's own span (and the caller's
 * tracestate, passed through), so a server that traces sees its work as
 * the child of the attempt that asked for it.
 *
 *   sg_otel_trace *t;
 *   if (sg_otel_trace_new(&t, otel) != 0) ...          // otel: <streamguard/otel.h>
 *   sg_otel_trace_set_genai(t, "openai", "chat", "gpt-4o");
 *   sg_otel_trace_set_parent(t, inbound_traceparent, inbound_tracestate);
 *   sg_op_options_add_observer(o, sg_otel_observer(t), t);
 *   ... run the operation ...
 *   sg_otel_trace_free(t);                             // once it has ended
 *
 * Spans go to the exporter as each ends (an attempt's at its end, the
 * operation's when it resolves), without blocking: a full queue drops
 * them and counts the drops (sg_otel_stats).  Nothing is allocated until
 * a span ends; the cost on the loop is a few allocations and a few dozen
 * attribute copies per attempt.
 *
 * A trace follows one operation at a time: start the next operation with
 * it only once the last one has ended (or make one trace per operation).
 * Its functions run on the thread that drives the operation, like every
 * observer's; the exporter may be shared by any number of traces and
 * threads.
 *
 * Every int-returning function returns 0 if it succeeds, or one of the
 * negative SG_E* codes it lists (<streamguard/core.h>).
 */
#ifndef STREAMGUARD_OTEL_TRACE_H
#define STREAMGUARD_OTEL_TRACE_H

#include <streamguard/core.h>
#include <streamguard/op.h>
#include <streamguard/policy.h>

#ifdef __cplusplus
extern "C" {
#endif

/** sg_otel - the OTLP exporter spans are handed to (<streamguard/otel.h>). */
typedef struct sg_otel sg_otel;

/** sg_otel_trace - the spans of one operation at a time.  Opaque. */
typedef struct sg_otel_trace sg_otel_trace;

/** Longest tracestate passed through, not counting the NUL (the W3C
 *  recommendation: at least 512 characters are propagated). */
#define SG_OTEL_TRACESTATE_MAX 512
/** Longest GenAI provider, operation or model name kept. */
#define SG_OTEL_NAME_MAX 127

/**
 * sg_otel_trace_new - a trace whose spans go to @otel (borrowed: it must
 * outlive the trace).  Its trace ids and span ids come from a generator
 * keyed by getrandom(2), shared by the process (a few atomic additions an
 * operation); each operation is the root of a trace of its own until a
 * parent is set.
 *
 * Returns 0 and sets *@out, or (then *@out, when @out is not NULL, is
 * NULL):
 *   SG_EINVAL  @out or @otel is NULL;
 *   SG_ENOMEM  out of memory.
 */
SG_EXTERN int sg_otel_trace_new(sg_otel_trace **out, sg_otel *otel);

/** sg_otel_trace_free - frees @t (NULL is fine); no operation may still
 *  run with its observer. */
SG_EXTERN void sg_otel_trace_free(sg_otel_trace *t);

/**
 * sg_otel_observer - the observer that turns the operations started with
 * it into spans: add it with @t as its user_data,
 *   sg_op_options_add_observer(o, sg_otel_observer(t), t);
 * beside any other observer (a ledger, the caller's own).  It sets
 * on_intent (the operation's span begins), on_attempt_start,
 * on_attempt_headers (traceparent, tracestate), on_attempt_end (the
 * attempt's span) and on_resolve (the operation's span); it never refuses
 * an operation, and its errors (no memory for a span) never change one.
 *
 * Returns the observer, owned by @t; NULL when @t is NULL.
 */
SG_EXTERN const sg_op_observer *sg_otel_observer(const sg_otel_trace *t);

/**
 * sg_otel_trace_set_parent - the operations started from now on are
 * children of the caller's span named by @traceparent, a W3C Trace
 * Context header value ("00-<trace-id>-<parent-id>-<flags>", lowercase
 * hex; a later version's longer form is read as version 00 says): their
 * spans take its trace id, the operation's span its parent id, and its
 * sampled flag decides whether any span is exported (not sampled: none,
 * but each attempt still carries a traceparent, unsampled, that names a
 * span id of its own).  @tracestate (NULL: none) goes unchanged on every
 * attempt's request and into every span.  NULL @traceparent removes the
 * parent (and the tracestate).  Default: none - each operation begins a
 * trace of its own, sampled.
 *
 * Returns 0, or (then the parent is unchanged):
 *   SG_EINVAL  @t is NULL, @traceparent is malformed (an all-zero id, a
 *              version ff, uppercase hex), or @tracestate holds a control
 *              character;
 *   SG_ERANGE  @tracestate is longer than SG_OTEL_TRACESTATE_MAX.
 */
SG_EXTERN int sg_otel_trace_set_parent(sg_otel_trace *t, const char *traceparent,
                                       const char *tracestate);

/**
 * sg_otel_trace_set_genai - what the operation is, in the GenAI semantic
 * conventions: @provider as gen_ai.provider.name ("openai", "anthropic",
 * "aws.bedrock", ...), @operation as gen_ai.operation.name ("chat",
 * "text_completion", ...) and @model as gen_ai.request.model (of the
 * operation's span, and of each attempt's unless its endpoint asks for a
 * model of its own: sg_otel_trace_set_endpoint_model), each NULL to leave
 * it out.  The operation's span is named "<operation> <model>"
 * (or "<operation>") as the conventions ask; without an operation,
 * "streamguard.operation".  Copied.  Default: none.
 *
 * Returns 0, or SG_EINVAL (@t is NULL), SG_ERANGE (a name longer than
 * SG_OTEL_NAME_MAX; nothing changes).
 */
SG_EXTERN int sg_otel_trace_set_genai(sg_otel_trace *t, const char *provider,
                                      const char *operation, const char *model);

/**
 * sg_otel_trace_set_endpoint_model - the model an attempt on endpoint
 * @endpoint (0-based, as sg_op_options_set_endpoints numbers them: 0 the
 * first, the later ones its fallbacks) asks for, as its span's
 * gen_ai.request.model: a fallback that sends another model name than the
 * operation's (another deployment, another provider).  An attempt on an
 * endpoint with none set carries the operation's model
 * (sg_otel_trace_set_genai), if any; one set to "" carries none (a
 * model the caller cannot name: better none than the operation's).
 * @model NULL removes it.  Copied;
 * kept for every operation started with @t until changed.  Default: none.
 *
 * Returns 0, or (then nothing changes):
 *   SG_EINVAL  @t is NULL;
 *   SG_ERANGE  @endpoint >= SG_OP_MAX_ENDPOINTS, or @model is longer than
 *              SG_OTEL_NAME_MAX;
 *   SG_ENOMEM  no memory for the copy.
 */
SG_EXTERN int sg_otel_trace_set_endpoint_model(sg_otel_trace *t, uint32_t endpoint,
                                               const char *model);

/**
 * sg_otel_trace_set_clock - how the operation's monotonic instants become
 * the spans' wall-clock times: monotonic instant @mono_ns is unix time
 * @unix_ns (nanoseconds since 1970).  For a hand-driven clock in tests,
 * and for a caller who measures the offset once.  Default: read from
 * CLOCK_MONOTONIC and CLOCK_REALTIME as each operation begins.
 *
 * Returns 0, or SG_EINVAL (@t is NULL or @unix_ns < 0).
 */
SG_EXTERN int sg_otel_trace_set_clock(sg_otel_trace *t, int64_t mono_ns, int64_t unix_ns);

/**
 * sg_otel_trace_traceparent - the W3C traceparent of the running
 * operation's own span (what a proxy hands back, or logs), into @buf
 * (at least 56 bytes), NUL-terminated.
 *
 * Returns 0, or SG_EINVAL (@t or @buf is NULL, or no operation has begun
 * with it), SG_ENOBUFS (@len < 56).
 */
SG_EXTERN int sg_otel_trace_traceparent(const sg_otel_trace *t, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* STREAMGUARD_OTEL_TRACE_H */
