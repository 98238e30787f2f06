/*
 * Endpoint health inside the policy: the shared table and each endpoint's
 * state machine (health.c), and what one operation holds of it and does
 * with it - its endpoints' keys, the consult before every attempt, the
 * feed at every end, its events (health_op.c).  docs/design.md,
 * "Endpoint health".
 */
#ifndef STREAMGUARD_POLICY_HEALTH_INTERNAL_H
#define STREAMGUARD_POLICY_HEALTH_INTERNAL_H

#include "end.h"
#include "ttft_sketch.h"

/* Bytes of an endpoint's key: HMAC-SHA-256 of its name and credential
 * under the table's secret, truncated. */
#define SG__HEALTH_KEY 16

typedef struct sg__hentry sg__hentry;

/* ----------------------------------------------------------- health.c */

/* Another hold on @h (an operation that uses it), and its release: the
 * last release frees it (sg_health_free is the caller's). */
void sg__health_hold(sg_health *h);
void sg__health_release(sg_health *h);

/* A new generation of a health's secret (process-wide). */
uint64_t sg__health_next_gen(void);
/* The key of endpoint @name asked with credential @cred (@cred_len bytes,
 * NULL: none) under @h's secret: an HMAC-SHA256, some 20,000
 * instructions, which is why an operation keys an endpoint only once it
 * is asked, and why a transport may keep the key (sg__op_endpoint_key). */
void sg__health_key(const sg_health *h, const char *name, const void *cred,
                    size_t cred_len, uint8_t key[SG__HEALTH_KEY]);

/* The entry of @key (named @name), made when there is none, held by one
 * more operation; NULL when the table is full of entries it cannot let go
 * (the endpoint is not tracked).  Takes the mutex. */
sg__hentry *sg__health_bind(sg_health *h, const uint8_t key[SG__HEALTH_KEY],
                            const char *name, int64_t now);
/* One operation fewer holds @e.  Takes the mutex. */
void sg__health_unbind(sg_health *h, sg__hentry *e);

/* Whether an attempt may go to @e at @now, lock-free: SG_OP_REASON_NONE
 * when it may - it then holds one of @e's in-flight slots (and, when @e
 * is half-open, its probe: *@probe) until sg__hentry_end, and is the
 * *@seq-th request of @e's request window count - else why not
 * (rate_limited, circuit_open, endpoint_busy) and in *@free_at when it
 * frees (a recheck instant when unknown).  @need: the tokens the request
 * needs of the tokens, input and output families (0: unknown). */
sg_op_reason sg__hentry_admit(const sg_health *h, sg__hentry *e, int64_t now,
                              const uint64_t need[3], int64_t *free_at, bool *probe,
                              uint64_t *seq);

/* How an attempt's end speaks of its endpoint's health. */
typedef enum sg__hkind {
    SG__H_NEUTRAL = 0, /* says nothing: a cancel, a 4xx, a cap, a hedge lost */
    SG__H_OK,          /* it served: the breaker's count starts again */
    SG__H_UNHEALTHY,   /* counts toward the breaker */
} sg__hkind;

/* An attempt admitted to @e ended at @now: its in-flight slot (and probe)
 * given back, and the breaker told (lock-free).  What it opens or closes,
 * and a cooling sg__hentry_cool starts, go to @h's listener. */
void sg__hentry_end(sg_health *h, sg__hentry *e, int64_t now, sg__hkind kind, bool probe);
/* The probe of half-open @e delivered its first item at @now: it has
 * answered - the breaker closes and the probe is given back (its
 * in-flight slot stays until sg__hentry_end, with probe false), so that
 * an answer streaming for minutes does not hold every other attempt back
 * until it ends.  Lock-free. */
void sg__hentry_probe_answered(sg_health *h, sg__hentry *e, int64_t now);
/* Gives back what sg__hentry_admit took, for an attempt that did not go. */
void sg__hentry_unadmit(sg__hentry *e, bool probe);
/* @e is cooling until @until at least (a provider named it at @now). */
void sg__hentry_cool(sg_health *h, sg__hentry *e, int64_t now, int64_t until);
/* The answer to @e's @seq-th request (0: not counted) said @left requests
 * remain until @reset (@left < 0: not said) and a window holds @limit (<= 0:
 * not said), read at @now: @e's request window. */
void sg__hentry_requests(sg__hentry *e, int64_t now, uint64_t seq, int64_t left,
                         int64_t reset, int64_t limit);
/* @e's last answer said @left tokens of family @f (0 tokens, 1 input, 2
 * output) remain until @reset. */
void sg__hentry_tokens(sg__hentry *e, int f, int64_t left, int64_t reset);
/* Counts what an operation did about @e (sg_health_entry's counters). */
void sg__hentry_count(sg__hentry *e, sg_op_health_action action, sg_op_reason why);
/* @e's first-token sketch, and half of @h's window in *@half. */
sg__ttft_sketch *sg__hentry_ttft(sg__hentry *e, const sg_health *h, int64_t *half);

/* --------------------------------------------------------- ttft_op.c */

/* What the end of @e tells its endpoint's sketch @ent (of @h). */
void sg__ttft_feed(const sg_health *h, sg__hentry *ent, const sg__end *e);
/* The sketch's counts and quantiles at @now, into @out. */
void sg__ttft_describe(const sg__ttft_sketch *s, int64_t half, int64_t now,
                       sg_health_entry *out);
/* Before the first attempt (sg__health_plan): with the first-token order,
 * the endpoints ranked by their median into @op's order and the first of
 * them; else the next endpoint, as planned. */
uint32_t sg__ttft_rank(sg_op *op, int64_t now);
/* Endpoint @e was admitted at @now for the first attempt: with the
 * first-token order, the order becomes @e then the others as configured,
 * and the report says so. */
void sg__ttft_chosen(sg_op *op, uint32_t e, int64_t now);

/* -------------------------------------------------------- health_op.c */

/* Bits of sg__rec.health: the attempt holds an in-flight slot of its
 * endpoint, and its probe. */
enum { SG__HREC_HELD = 1u << 0, SG__HREC_PROBE = 1u << 1 };

/* sg_op_start with health: the operation's block, holding @op->opts_'s
 * health (0 or SG_ENOMEM).  Nothing without health. */
int sg__health_op_start(sg_op *op);
/* The operation's block released: the slots its running attempts hold,
 * its entries, its hold on the table (sg__op_reset). */
void sg__health_op_reset(sg_op *op);

/* Before an attempt (sg_op_next_attempt): the endpoint it goes to in
 * *@ep - the next one when it is free, else the next free one - holding
 * its slot; or SG_EINPROGRESS (the operation waits until plan->free_at)
 * or SG_EREFUSED (it ended, the plan says why). */
int sg__health_plan(sg_op *op, int64_t now, sg_op_plan *plan, uint32_t *ep);
/* Endpoint @i's entry (bound at its first use), NULL when it is not
 * tracked or @op has no health. */
sg__hentry *sg__health_entry(sg_op *op, uint32_t i, int64_t now);
/* Before a hedge: whether endpoint @e is free for it (then holding its
 * slot), recording a skip when not; *@why the reason it is not. */
bool sg__health_hedge_try(sg_op *op, uint32_t e, int64_t now, sg_op_reason *why);
/* After the plan: the slot held goes to the attempt planned (@rc 0), or
 * back when none was. */
void sg__health_planned(sg_op *op, int rc, const sg_op_plan *plan);

/* At an attempt's end (sg_op_attempt_done, after its Retry-After was
 * read): its endpoint learns what it said, and its slot goes back. */
void sg__health_feed(sg_op *op, const sg__end *e);

/* The report's "endpoint_health" and "endpoint_free_in_ms" (report.c);
 * nothing without health. */
void sg__health_report(sg__sink *s, const sg_op *op);

#endif /* STREAMGUARD_POLICY_HEALTH_INTERNAL_H */
